/**
 * The `single_turn_math` rollout worker: one sampled answer per task, scored by rule.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import type { JudgeItem } from "../rewards/llm-judge.js";
import { judgeMathAnswer, mathJudgeOf, promptText, type MathJudge } from "../rewards/math-judge.js";
import { rewardModelOf, type RewardModelScorer } from "../rewards/reward-model.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { type RolloutWorkerContext } from "../contracts/worker.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { answersMatch, extractFinalAnswer, groundTruthOf } from "./math-answer.js";
import { promptMessages } from "./messages.js";
import { NexrlError } from "../errors.js";

/**
 * Samples one answer to the row's prompt (text or chat messages, formatted with the model's chat
 * template), extracts the final answer (`\boxed{…}`, `<answer>…</answer>`, `#### …`, else the
 * last number) and rewards 1 when it equals the row's `ground_truth` (or
 * `reward_model.ground_truth`), 0 otherwise. With `agent.math.judge_mode: llm_judge` the LLM
 * judge of `rollout_worker.judge` gives the reward instead (with `rule+llm_judge`, a rule match
 * still scores 1), and its words go in `extraFields.judge`; the judge also grades answers that
 * `max_response_length` cut short. With `judge_mode: reward_model` the trained reward model of
 * `rollout_worker.reward_model` gives the reward (its score r(x, y) of the prompt and answer
 * tokens, see `RewardModelScorer`; recorded in `extraFields.reward_model`), and rows need no
 * ground truth. Otherwise a response cut by the length limit scores 0; a
 * sequence longer than `max_sequence_length` always does.
 */
export class SingleTurnMathRolloutWorker extends BaseRolloutWorker {
  /** The run's LLM judge, shared by every worker of the run; undefined with `judge_mode: rule`. */
  private readonly judge: MathJudge | undefined;
  /** The run's reward model, shared likewise; undefined unless `judge_mode: reward_model`. */
  private readonly rewardModel: RewardModelScorer | undefined;

  /**
   * @param context name, settings and tokenizer, given by the pipeline.
   * @throws NexrlError when the judge's API key variable is not set.
   */
  constructor(context: RolloutWorkerContext) {
    super(context);
    this.judge = mathJudgeOf(context.settings);
    this.rewardModel = rewardModelOf(context.settings, context.service, context.tokenizer);
  }

  /** Samples, scores and returns one trajectory. */
  async rollout(task: RolloutTask): Promise<Trajectory> {
    let answer: Awaited<ReturnType<SingleTurnMathRolloutWorker["sample"]>>;
    try {
      answer = await this.sample(task);
    } catch (error) {
      // A ranked group cannot be ranked without this answer: its other rollouts must not wait for it.
      this.judge?.withdraw(task, error);
      throw error;
    }
    const { trajectory, cut, correct, item } = answer;
    if (this.judge) {
      const judged = await judgeMathAnswer(this.judge, task, item, { ruleMatch: correct, cut: cut.truncated });
      trajectory.reward = judged.reward;
      if (judged.record) trajectory.extraFields.judge = judged.record;
    }
    if (this.rewardModel) {
      trajectory.reward = await this.rewardModel.score(cut.tokens);
      trajectory.extraFields.reward_model = { score: trajectory.reward };
    }
    if (cut.truncated) {
      Object.assign(trajectory, { tokens: cut.tokens, lossMask: cut.lossMask, logprobs: cut.logprobs, reward: 0 });
      trajectory.extraFields.is_truncated = true;
    }
    return trajectory;
  }

  /** Samples an answer and scores it by rule; `item` is what a judge is shown. */
  private async sample(task: RolloutTask) {
    const groundTruth = groundTruthOf(task.data);
    if (groundTruth === undefined && !this.rewardModel) {
      throw new NexrlError(
        `row ${rowNumber(task)} has no ground truth; math rows need "ground_truth" (or "reward_model": {"ground_truth": ...})`,
      );
    }
    const messages = promptMessages(task.prompt);
    const result = await this.inferenceClient.chat(messages);
    const extracted = extractFinalAnswer(result.response);
    const correct =
      groundTruth !== undefined && result.finishReason !== "length" && answersMatch(extracted, groundTruth);
    const trajectory = completionTrajectory(result, correct ? 1 : 0, {
      ground_truth: groundTruth ?? null,
      extracted_answer: extracted ?? null,
      ...(task.data.data_source !== undefined && { data_source: task.data.data_source }),
    });
    const cut = this.truncate(trajectory.tokens, trajectory.lossMask, trajectory.logprobs);
    const item: JudgeItem = { prompt: promptText(messages), response: result.response, groundTruth };
    return { trajectory, cut, correct, item };
  }
}
