/**
 * Metrics of the trajectories a training step receives.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import { putSummary } from "./stats.js";

/**
 * `rollout/num_trajectories`, `rollout/reward_{mean,std,min,max}`,
 * `rollout/response_len_{mean,max}` (trained tokens), `rollout/seq_len_mean`,
 * `rollout/score/<key>_mean` for each entry of the trajectories' `score`, and the sum over the
 * batch of each entry of their `counters` under its own key (such as
 * `agent/prefix_breaks`).
 */
export function rolloutMetrics(trajectories: readonly Trajectory[]): Record<string, number> {
  const metrics: Record<string, number> = { "rollout/num_trajectories": trajectories.length };
  putSummary(
    metrics,
    "rollout/reward",
    trajectories.map((t) => t.reward),
  );
  putSummary(
    metrics,
    "rollout/response_len",
    trajectories.map((t) => t.numLossTokens),
    ["mean", "max"],
  );
  putSummary(
    metrics,
    "rollout/seq_len",
    trajectories.map((t) => t.tokens.length),
    ["mean"],
  );
  const scores = new Map<string, number[]>();
  for (const t of trajectories) {
    for (const [key, value] of Object.entries(t.score ?? {}))
      scores.set(key, [...(scores.get(key) ?? []), Number(value)]);
  }
  for (const [key, values] of scores) putSummary(metrics, `rollout/score/${key}`, values, ["mean"]);
  for (const t of trajectories) {
    for (const [key, value] of Object.entries(t.counters ?? {})) metrics[key] = (metrics[key] ?? 0) + value;
  }
  return metrics;
}
