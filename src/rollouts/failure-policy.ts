/**
 * What happens when a rollout fails.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";

/**
 * How failed rollouts (an exception, an invalid trajectory or a timeout) are handled:
 * - `fail_fast`: the run stops with a {@link RolloutError} at the first failure;
 * - `retry`: the rollout is run again up to `retries` times (new seeds), then the run stops;
 * - `skip`: after `retries` retries the task is dropped and counted; a group left with fewer than
 *   `minGroupSize` rollouts that produced trajectories is dropped whole.
 */
export type FailurePolicy =
  | {
      /** Stop at the first failure. */
      readonly mode: "fail_fast";
    }
  | {
      /** Retry, then stop. */
      readonly mode: "retry";
      /** Retries after the first attempt. */
      readonly retries: number;
    }
  | {
      /** Retry, then drop the task. */
      readonly mode: "skip";
      /** Retries after the first attempt. */
      readonly retries: number;
      /** Fewest productive rollouts a group keeps to be trained on. */
      readonly minGroupSize: number;
    };

/**
 * The policy a recipe asks for: `runtime_monitor.exception_handling.policy: continue` skips
 * (after `rollout_worker.max_rollout_retries` retries), any other policy stops the run after the
 * retries. The minimum group size of `skip` defaults to 2 when tasks are repeated (a group of one
 * has no baseline for GRPO) and 1 otherwise.
 */
export function failurePolicyFromRecipe(config: RecipeConfig, minGroupSize?: number): FailurePolicy {
  const retries = config.rollout_worker.max_rollout_retries;
  if (config.runtime_monitor.exception_handling.policy === "continue") {
    return { mode: "skip", retries, minGroupSize: minGroupSize ?? Math.min(2, config.data.rollout_repeat_n) };
  }
  return retries > 0 ? { mode: "retry", retries } : { mode: "fail_fast" };
}
