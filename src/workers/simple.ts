/**
 * The `simple` rollout worker: a text completion scored by its `<answer>` tag.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { completionTrajectory } from "./completion-trajectory.js";
import { groundTruthOf } from "./math-answer.js";
import { NexrlError } from "../errors.js";

/**
 * NexRL's `simple` worker: completes the text prompt and rewards 1 when the text inside the last
 * `<answer>…</answer>` equals the row's ground truth exactly (after trimming), 0 otherwise.
 */
export class SimpleRolloutWorker extends BaseRolloutWorker {
  /** Samples, scores and returns one trajectory. */
  async rollout(task: RolloutTask): Promise<Trajectory> {
    if (typeof task.prompt !== "string")
      throw new NexrlError(
        `row ${rowNumber(task)}: the simple worker needs a text prompt; use single_turn_math for chat messages`,
      );
    const groundTruth = groundTruthOf(task.data);
    if (groundTruth === undefined)
      throw new NexrlError(`row ${rowNumber(task)} has no "ground_truth" to score the answer against`);
    const result = await this.inferenceClient.completion(task.prompt);
    const answer = [...result.response.matchAll(/<answer>([\s\S]*?)<\/answer>/g)].at(-1)?.[1]?.trim();
    return completionTrajectory(result, answer === groundTruth.trim() ? 1 : 0, {
      ground_truth: groundTruth,
      extracted_answer: answer ?? null,
    });
  }
}
