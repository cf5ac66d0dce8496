/**
 * The loggers of `logger.backend` beyond the console's progress line and `metrics.jsonl` (which
 * every run writes): each is opened when the run starts (with the resolved recipe, secrets
 * redacted), receives every step's metrics row, and hears how the run ended.
 * @module
 * @internal
 */
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import type { MetricsRow } from "../events.js";
import { MlflowLogger, mlflowSettings } from "./mlflow.js";
import { TensorBoardLogger } from "./tensorboard.js";
import type { RunEnd, RunStart } from "./types.js";
import { WandbLogger, wandbSettings } from "./wandb.js";

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
