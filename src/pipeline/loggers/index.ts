/**
 * The loggers of `logger.backend` beyond the console's progress line and `metrics.jsonl` (which
 * every run writes): each receives every step's metrics row.
 * @module
 * @internal
 */
import type { MetricsRow } from "../events.js";
import { TensorBoardLogger } from "./tensorboard.js";

/** Where a run's metrics rows go besides `metrics.jsonl`. */
export interface RunLoggers {
  /** Hands the row of one step to every logger; a logger that fails warns and keeps the row. */
  step(row: MetricsRow): Promise<void>;
}

/**
 * The loggers `backends` names, writing into the run folder `outputDir`; `firstStep` is the first
 * step this session writes.
 */
export async function openRunLoggers(
  backends: readonly string[],
  outputDir: string,
  firstStep: number,
  warn: (message: string) => void,
): Promise<RunLoggers> {
  const loggers = backends.includes("tensorboard") ? [await TensorBoardLogger.open(outputDir, firstStep, warn)] : [];
  return {
    step: async (row) => {
      for (const logger of loggers) await logger.step(row);
    },
  };
}
