/**
 * The `single_turn_math` rollout worker: one sampled answer per task, scored by rule.
 * @module
 */
import type { Trajectory } from "../../types/trajectory.js";
import { rowNumber, type RolloutTask } from "../task.js";
import { BaseRolloutWorker } from "./base.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { answersMatch, extractFinalAnswer, groundTruthOf } from "./math-answer.js";
import { promptMessages } from "./messages.js";
import { NexrlError } from "../../errors.js";

/**
 * Samples one answer to the row's prompt (text or chat messages, formatted with the model's chat
 * template), extracts the final answer (`\boxed{…}`, `<answer>…</answer>`, `#### …`, else the
 * last number) and rewards 1 when it equals the row's `ground_truth` (or
 * `reward_model.ground_truth`), 0 otherwise. A response cut by the length limit, or a sequence
 * longer than `max_sequence_length`, scores 0.
 */
export class SingleTurnMathRolloutWorker extends BaseRolloutWorker {
  /** Samples, scores and returns one trajectory. */
  async rollout(task: RolloutTask): Promise<Trajectory> {
    const groundTruth = groundTruthOf(task.data);
    if (groundTruth === undefined) {
      throw new NexrlError(
        `row ${rowNumber(task)} has no ground truth; math rows need "ground_truth" (or "reward_model": {"ground_truth": ...})`,
      );
    }
    const result = await this.inferenceClient.chat(promptMessages(task.prompt, `row ${rowNumber(task)}`));
    const extracted = extractFinalAnswer(result.response);
    const correct = result.finishReason !== "length" && answersMatch(extracted, groundTruth);
    const trajectory = completionTrajectory(result, correct ? 1 : 0, {
      ground_truth: groundTruth,
      extracted_answer: extracted ?? null,
      ...(task.data.data_source !== undefined && { data_source: task.data.data_source }),
    });
    const cut = this.truncate(trajectory.tokens, trajectory.lossMask, trajectory.logprobs);
    if (cut.truncated) {
      Object.assign(trajectory, { tokens: cut.tokens, lossMask: cut.lossMask, logprobs: cut.logprobs, reward: 0 });
      trajectory.extraFields.is_truncated = true;
    }
    return trajectory;
  }
}
