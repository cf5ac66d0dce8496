/**
 * {@link Validator}: scores the current policy on the validation tasks.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import type { DataLoader } from "../data/data-loader.js";
import type { RolloutRunner } from "./runner.js";
import { putSummary } from "../algorithms/stats.js";
import { maxOf } from "../wire/arrays.js";
import { validationExamples, type ValidationExample } from "./validation-examples.js";
import { validationTargetOf, type TargetScorer, type ValidationTarget } from "./validation-nll.js";

/** Options of {@link Validator}. */
export interface ValidatorOptions {
  /** A rollout passes (for pass@k) when its reward is at least this (default 1: full credit). */
  passThreshold?: number;
  /** Scores the validation targets workers attach (`extraFields.validation_target`) into `val/nll`; without it they are not scored. */
  scoreTargets?: TargetScorer;
}

/** C(n, k) as a float. */
function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let out = 1;
  for (let i = 1; i <= k; i++) out = (out * (n - k + i)) / i;
  return out;
}

/** Unbiased pass@k of a group with `n` rollouts of which `c` passed: 1 − C(n−c, k) / C(n, k). */
export function passAtK(n: number, c: number, k: number): number {
  if (n < k) return c > 0 ? 1 : 0;
  return 1 - choose(n - c, k) / choose(n, k);
}

/**
 * Runs every validation task (each row `rollout_repeat_n` times, from `validate.data`) on the
 * current sampler and summarises: `val/reward_mean`, `val/reward_std`, `val/num_samples`,
 * `val/response_len_mean`, `val/<data_source>/reward_mean` for rows with a `data_source` field, and when
 * rows are repeated (n > 1) `val/pass@1` and `val/pass@n`; failures appear as `val/failed` and
 * `val/skipped`. When rollouts carry validation targets (the `sft` worker's), `val/nll` is the
 * negative log-likelihood per target token under the current weights and `val/nll_tokens` the
 * tokens it is measured over.
 */
export class Validator {
  private readonly passThreshold: number;
  private readonly scoreTargets: TargetScorer | undefined;
  /** The trajectories of the last {@link Validator.run}, in the order of the validation rows. */
  trajectories: readonly Trajectory[] = [];
  /** A few rollouts of the last {@link Validator.run} as text (the first validation rows), for the progress output. */
  examples: readonly ValidationExample[] = [];

  /**
   * @param loader the validation tasks.
   * @param runner runs them (its own workers and counters).
   * @param options pass@k threshold.
   */
  constructor(
    private readonly loader: DataLoader,
    private readonly runner: RolloutRunner,
    options: ValidatorOptions = {},
  ) {
    this.passThreshold = options.passThreshold ?? 1;
    this.scoreTargets = options.scoreTargets;
  }

  /**
   * Validates the policy of `version` (the seeds of the rollouts derive from it).
   * @throws RolloutError when a validation rollout fails under a stopping policy.
   */
  async run(version: number): Promise<Record<string, number>> {
    const groups = this.loader.allGroups(version);
    const outcomes = await Promise.all(groups.flatMap((group) => group.tasks.map((task) => this.runner.run(task))));
    const trajectories = outcomes.flatMap((o) => o.trajectories);
    this.trajectories = trajectories;
    this.examples = validationExamples(outcomes);
    const counts = this.runner.takeCounts();
    const metrics: Record<string, number> = {
      "val/num_samples": trajectories.length,
      "val/failed": counts.failed,
      "val/skipped": counts.skipped,
      "val/unknown_token_ids": counts.unknownTokenIds,
    };
    putSummary(
      metrics,
      "val/reward",
      trajectories.map((t) => t.reward),
      ["mean", "std"],
    );
    putSummary(
      metrics,
      "val/response_len",
      trajectories.map((t) => t.numLossTokens),
      ["mean"],
    );
    const bySource = new Map<string, number[]>();
    for (const { task, trajectories: produced } of outcomes) {
      const source = task.data.data_source;
      if (typeof source === "string")
        bySource.set(source, [...(bySource.get(source) ?? []), ...produced.map((t) => t.reward)]);
    }
    for (const [source, rewards] of [...bySource].sort(([a], [b]) => a.localeCompare(b)))
      putSummary(metrics, `val/${source}/reward`, rewards, ["mean"]);
    await this.putTargetNll(metrics, trajectories);
    const n = groups[0]?.tasks.length ?? 1;
    if (n > 1)
      this.putPassAtK(
        metrics,
        outcomes.map((o) => ({ groupId: o.task.groupId, trajectories: o.trajectories })),
        n,
      );
    return metrics;
  }

  /** `val/nll` and `val/nll_tokens` of the trajectories' validation targets, when they have any and a scorer is set. */
  private async putTargetNll(metrics: Record<string, number>, trajectories: readonly Trajectory[]): Promise<void> {
    const targets = trajectories.flatMap((t): ValidationTarget[] => {
      const target = validationTargetOf(t.extraFields);
      return target ? [target] : [];
    });
    if (targets.length === 0 || !this.scoreTargets) return;
    const { nll, tokens } = await this.scoreTargets(targets);
    if (tokens === 0) return;
    metrics["val/nll"] = nll / tokens;
    metrics["val/nll_tokens"] = tokens;
  }

  private putPassAtK(
    metrics: Record<string, number>,
    runs: ReadonlyArray<{ groupId: string; trajectories: Trajectory[] }>,
    k: number,
  ): void {
    const groups = new Map<string, { n: number; c: number }>();
    for (const run of runs) {
      if (run.trajectories.length === 0) continue;
      const g = groups.get(run.groupId) ?? { n: 0, c: 0 };
      g.n++;
      if (maxOf(run.trajectories.map((t) => t.reward)) >= this.passThreshold) g.c++;
      groups.set(run.groupId, g);
    }
    if (groups.size === 0) return;
    const values = [...groups.values()];
    metrics["val/pass@1"] = values.reduce((a, g) => a + passAtK(g.n, g.c, 1), 0) / values.length;
    metrics[`val/pass@${k}`] = values.reduce((a, g) => a + passAtK(g.n, g.c, k), 0) / values.length;
  }
}
