/**
 * What the run tells its loggers when it starts and when it ends.
 * @module
 * @internal
 */
import type { MetricsRow, RunSummary } from "../events.js";

/** How a run ended, as the remote loggers record it. */
export type RunStatus = "finished" | "failed" | "stopped";

/** What the loggers hear at the end of a run. */
export interface RunEnd {
  /** `finished` (all steps, or the data ran out), `failed` (an error stopped it), `stopped` (aborted). */
  status: RunStatus;
  /** The run's summary, over every metrics row of the run folder. */
  summary: RunSummary;
}

/** What a logger is opened with. */
export interface RunStart {
  /** The run folder. */
  outputDir: string;
  /** The resolved recipe with its secrets redacted. */
  config: unknown;
  /** The first step this session writes (0 for a fresh run; after a resume, the step after its checkpoint's). */
  firstStep: number;
  /** Whether this session continues the run of the folder's checkpoint (a resume, not a warm start). */
  resumed: boolean;
  /** The metrics rows a resume keeps (the steps up to its checkpoint), oldest first. */
  earlierRows: readonly MetricsRow[];
  /** Environment the loggers read their defaults and credentials from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Reports a problem (secrets are redacted by the run). */
  warn: (message: string) => void;
}
