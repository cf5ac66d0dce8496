/**
 * `nexrl/algorithms`: the building blocks of the built-in trainers and rewards, for a trainer or
 * reward of your own — group-normalised and per-token advantages, the pairwise preference loss
 * and pairing, the LLM judge's and the reward-model scorer's types, and the options of the
 * built-in trainers a subclass passes on.
 *
 * @packageDocumentation
 * @module nexrl/algorithms
 */

/** @category Advantages */
export { groupAdvantages, type GroupAdvantageOptions, type GroupAdvantages } from "../algorithms/advantages.js";
/** @category Advantages */
export {
  discountedFutureSum,
  distillationAdvantages,
  klPenaltyAdvantages,
  type DistillationResult,
  type KlPenaltyInput,
  type KlPenaltyResult,
} from "../algorithms/token-advantages.js";
/** @category Preferences */
export { pairwiseLogisticLoss, type PairwiseLossOptions } from "../algorithms/pairwise-loss.js";
/** @category Preferences */
export { preferencePairs, type ScoredSequence } from "../algorithms/preference.js";
/** @category Trainer options */
export type { CrossEntropyTrainerOptions } from "../algorithms/cross-entropy.js";
/** @category Trainer options */
export type { GrpoTrainerOptions, KlPenaltyOptions } from "../algorithms/grpo.js";
/** @category Rewards */
export type { JudgeItem, JudgeVerdict } from "../rewards/llm-judge.js";
/** @category Rewards */
export type { LlmJudgeOptions } from "../contracts/judge.js";
/** @category Rewards */
export {
  RewardModelScorer,
  rewardModelSequence,
  REWARD_MODEL_QUESTION,
  REWARD_MODEL_JUDGEMENT,
  type RewardModelSequence,
} from "../rewards/reward-model.js";
/** @category Rewards */
export { VALIDATION_TARGET, type ValidationTarget } from "../rollouts/validation-nll.js";
