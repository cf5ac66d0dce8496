/**
 * What a run reports while it runs and when it ends.
 * @module
 */
import type { StepRow } from "./jsonl-log.js";

/** One line of `metrics.jsonl`: flat metrics of a training step (step 0 holds validation before training). */
export interface MetricsRow extends StepRow {
  [key: string]: number | null;
}

/** Why a run ended. */
export type StopReason = "completed" | "aborted" | "data_exhausted";

/** Something that happened during a run, for `onEvent`. */
export type RunEvent =
  | { readonly type: "start"; readonly outputDir: string; readonly fromStep: number; readonly totalSteps: number; readonly resumedFrom?: string }
  | { readonly type: "step"; readonly step: number; readonly metrics: MetricsRow }
  | { readonly type: "validation"; readonly step: number; readonly metrics: Readonly<Record<string, number>> }
  | { readonly type: "checkpoint"; readonly step: number; readonly path: string }
  | { readonly type: "warning"; readonly message: string }
  | { readonly type: "end"; readonly step: number; readonly reason: StopReason };

/** What {@link runRecipe} returns. */
export interface RunResult {
  /** The run's output folder. */
  outputDir: string;
  /** Training steps completed (counting those before a resume). */
  steps: number;
  /** Every row of `metrics.jsonl`, in order. */
  metrics: MetricsRow[];
  /** The run-state file of the last checkpoint, if any was saved. */
  lastCheckpoint: string | undefined;
  /** Why the run ended. */
  stopReason: StopReason;
}
