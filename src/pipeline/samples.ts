/**
 * Decoded trajectories for `samples.jsonl`.
 * @module
 */
import type { Tokenizer } from "../types/tokenizer.js";
import type { Trajectory } from "../types/trajectory.js";
import type { StepRow } from "./jsonl-log.js";

/** One line of `samples.jsonl`. */
export interface SampleRow extends StepRow {
  /** Group id. */
  group: string | null;
  /** Run id within the group. */
  run: number | null;
  /** Reward. */
  reward: number;
  /** Scalar advantage, or the mean of the per-token advantages over trained tokens; null when none was set. */
  advantage: number | null;
  /** Policy version that sampled it. */
  policy_version: number | null;
  /** Decoded tokens before the first trained token (an id without a token shows as `<unk:ID>`). */
  prompt: string;
  /** Decoded tokens from the first trained token on. */
  response: string;
  /** The trajectory's `extraFields.diagnostics` (such as an agent's prefix breaks), when it has any. */
  diagnostics?: unknown[];
}

const PLACEHOLDERS = { unknownIds: "placeholder" } as const;

/** A trajectory's non-empty `extraFields.diagnostics`. */
function diagnosticsOf(t: Trajectory): unknown[] | undefined {
  const diagnostics = t.extraFields.diagnostics;
  return Array.isArray(diagnostics) && diagnostics.length > 0 ? diagnostics : undefined;
}

/**
 * Up to `count` trajectories spread evenly over `trajectories` (those trained on), then every
 * trajectory of `batch` (the whole step, dropped ones included) with diagnostics, decoded.
 */
export function sampleRows(
  step: number,
  trajectories: readonly Trajectory[],
  tokenizer: Tokenizer,
  count: number,
  batch: readonly Trajectory[] = trajectories,
): SampleRow[] {
  const picked = new Set<Trajectory>();
  for (let k = 0; k < Math.min(count, trajectories.length); k++)
    picked.add(trajectories[Math.floor((k * trajectories.length) / Math.min(count, trajectories.length))]!);
  for (const t of batch) if (diagnosticsOf(t)) picked.add(t);
  return [...picked].map((t) => {
    const split = t.lossMask.indexOf(1) < 0 ? t.tokens.length : t.lossMask.indexOf(1);
    let advantage: number | null = t.advantage ?? null;
    if (t.advantages) {
      const trained = t.advantages.filter((_, j) => t.lossMask[j] === 1);
      advantage = trained.length ? trained.reduce((a, b) => a + b, 0) / trained.length : 0;
    }
    return {
      step,
      group: t.groupId ?? null,
      run: t.runId ?? null,
      reward: t.reward,
      advantage,
      policy_version: t.policyVersion ?? null,
      // Ids the tokenizer has no token for (a sampler's, beyond its vocabulary) show as <unk:ID>.
      prompt: tokenizer.decode(t.tokens.slice(0, split), PLACEHOLDERS),
      response: tokenizer.decode(t.tokens.slice(split), PLACEHOLDERS),
      ...(diagnosticsOf(t) && { diagnostics: diagnosticsOf(t) }),
    };
  });
}
