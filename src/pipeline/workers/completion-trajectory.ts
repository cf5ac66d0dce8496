/**
 * Trajectories from inference results.
 * @module
 */
import type { InferenceResult } from "../../services/inference/types.js";
import { Trajectory } from "../../types/trajectory.js";

/**
 * A trajectory of one completion: prompt tokens with loss mask 0 and logprob 0, then the sampled
 * tokens with loss mask 1 and their sampler logprobs, token for token as the model produced them.
 */
export function completionTrajectory(result: InferenceResult, reward: number, extraFields: Record<string, unknown> = {}): Trajectory {
  const { promptTokens, responseTokens, logprobs } = result;
  // `concat` sizes each array exactly; spreading two arrays into a literal grows it as it goes,
  // leaving up to half its capacity unused for as long as the trajectory waits in the pool.
  const zeros = promptTokens.map(() => 0);
  return new Trajectory({
    tokens: promptTokens.concat(responseTokens),
    lossMask: zeros.concat(responseTokens.map(() => 1)),
    logprobs: zeros.concat(logprobs),
    reward,
    extraFields: { response: result.response, finish_reason: result.finishReason, ...extraFields },
  });
}
