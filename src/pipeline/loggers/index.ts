/**
 * The loggers of `logger.backend` beyond the console's progress line and `metrics.jsonl` (which
 * every run writes): each is opened when the run starts (with the resolved recipe, secrets
 * redacted), receives every step's metrics row, and hears how the run ended.
 * @module
 * @internal
 */
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import type { MetricsRow } from "../events.js";
import type { RunSummary } from "../run-summary.js";
import { MlflowLogger, mlflowSettings } from "./mlflow.js";
import { TensorBoardLogger } from "./tensorboard.js";
import { WandbLogger, wandbSettings } from "./wandb.js";

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

/** One logger of `logger.backend`. */
interface RunLogger {
  step(row: MetricsRow): Promise<void>;
  end?(end: RunEnd): Promise<void>;
}

/** Where a run's metrics rows go besides `metrics.jsonl`. */
export interface RunLoggers {
  /** Hands the row of one step to every logger; a logger that fails warns and keeps the row. */
  step(row: MetricsRow): Promise<void>;
  /** Tells every logger how the run ended; remote loggers send what they still hold, within their flush timeout. */
  end(end: RunEnd): Promise<void>;
}

/**
 * Checks, before the run writes anything, that the remote loggers of `logger` have what they
 * need from the environment (a tracking server, an API key).
 * @throws `RecipeError` naming the setting that is missing.
 */
export function checkLoggerSettings(
  logger: RecipeConfig["logger"],
  env: Readonly<Record<string, string | undefined>>,
): void {
  if (logger.backend.includes("mlflow")) mlflowSettings(logger, env);
  if (logger.backend.includes("wandb")) wandbSettings(logger, env);
}

/** Opens the loggers `logger.backend` names (console and jsonl have none of their own). */
export async function openRunLoggers(logger: RecipeConfig["logger"], start: RunStart): Promise<RunLoggers> {
  const loggers: RunLogger[] = [];
  const { backend } = logger;
  if (backend.includes("tensorboard"))
    loggers.push(await TensorBoardLogger.open(start.outputDir, start.firstStep, start.warn));
  if (backend.includes("mlflow")) loggers.push(await MlflowLogger.open(mlflowSettings(logger, start.env), start));
  if (backend.includes("wandb")) loggers.push(await WandbLogger.open(wandbSettings(logger, start.env), start));
  return {
    step: async (row) => {
      for (const each of loggers) await each.step(row);
    },
    end: async (end) => {
      await Promise.all(loggers.flatMap((each) => (each.end ? [each.end(end)] : [])));
    },
  };
}
