/**
 * Trajectories from inference results.
 * @module
 */
import type { InferenceResult } from "../contracts/inference.js";
import { Trajectory } from "../contracts/trajectory.js";

/**
 * A trajectory of one completion: prompt tokens with loss mask 0 and logprob 0, then the sampled
 * tokens with loss mask 1 and their sampler logprobs, token for token as the model produced them.
 */
export function completionTrajectory(
  result: InferenceResult,
  reward: number,
  extraFields: Record<string, unknown> = {},
): Trajectory {
  const { promptTokens, responseTokens, logprobs } = result;
  // Each array is made once at its final length and filled in place: no temporary arrays per
  // rollout, and no spare capacity held for as long as the trajectory waits in the pool.
  const p = promptTokens.length;
  const n = p + responseTokens.length;
  const lossMask = new Array<number>(n).fill(0, 0, p).fill(1, p);
  const sampled = new Array<number>(n).fill(0, 0, p);
  for (let i = p; i < n; i++) sampled[i] = logprobs[i - p]!;
  return new Trajectory({
    tokens: promptTokens.concat(responseTokens),
    lossMask,
    logprobs: sampled,
    reward,
    extraFields: { response: result.response, finish_reason: result.finishReason, ...extraFields },
  });
}
