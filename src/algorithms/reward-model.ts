/**
 * The `remote_api_reward_model` trainer: a Bradley–Terry reward model from preference pairs.
 * @module
 */
import type { CustomLossFn } from "../contracts/training.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { rewardModelSequence } from "../rewards/reward-model.js";
import { pairwiseLogisticLoss } from "./pairwise-loss.js";
import { PreferenceTrainer, type ScoredSequence } from "./preference.js";

/**
 * Trains a Bradley–Terry reward model on chosen/rejected pairs: the model's reward r(x, y) is its
 * log-probability of ` Yes` after the prompt, the response and the question
 * `Is this response good?` (see {@link rewardModelSequence}; per-token logprobs are all every
 * training service offers, so the scalar is read from them), and the loss of a pair is
 * −log σ(r_chosen − r_rejected). Metrics: `rm/loss`, `rm/margin` (mean r_chosen − r_rejected),
 * `rm/accuracy` (fraction of pairs ranked right), `rm/chosen_reward`, `rm/rejected_reward` and
 * `rm/num_pairs`, on the step's pairs before its update. Score rollouts with the trained model
 * through `rollout_worker.agent.math.judge_mode: reward_model` (or a `RewardModelScorer`).
 */
export class RewardModelTrainer extends PreferenceTrainer {
  /** The trajectory's tokens, the question and the judgement, scored at the judgement. */
  protected scoredSequence(trajectory: Trajectory): ScoredSequence {
    return rewardModelSequence(this.context.tokenizer, trajectory.tokens);
  }

  /** −log σ(r_chosen − r_rejected). */
  protected pairLoss(): CustomLossFn {
    return pairwiseLogisticLoss({ beta: 1, metricPrefix: "rm" });
  }
}
