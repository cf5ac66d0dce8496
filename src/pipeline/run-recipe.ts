/**
 * {@link runRecipe}: the training pipeline's entry point.
 * @module
 */
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { loadRecipe, type LoadedRecipe } from "../recipe/load.js";
import { redactSecrets } from "../recipe/redact.js";
import { NexrlError } from "../types/errors.js";
import { listRunStates, locateRunState, readRunState } from "./checkpoint.js";
import type { RunEvent, RunResult } from "./events.js";
import { ProgressPrinter, type ProgressOutput } from "./progress.js";
import { resolveRunDirectory } from "./run-dir.js";
import { executeRun, type StartPlan } from "./training-run.js";

/** Options of {@link runRecipe}. */
export interface RunRecipeOptions {
  /** Dotted overrides (`trainer.total_train_steps=10`), for a recipe given by path. */
  overrides?: readonly string[];
  /** Names the run: outputs go to `<NEXRL_STORAGE_PATH or ./runs>/<tag>` (default tag: the UTC start time). */
  tag?: string;
  /** The output folder itself; wins over `tag`. */
  outputDir?: string;
  /** Aborting stops the run after the step in flight and saves a checkpoint to resume from. */
  signal?: AbortSignal;
  /** Receives every {@link RunEvent}. */
  onEvent?: (event: RunEvent) => void;
  /** Where progress is printed (a live line on a terminal), or false for none (default: none). */
  progress?: ProgressOutput | false;
  /** Environment for the recipe's `${oc.env:…}`, secret redaction and `NEXRL_STORAGE_PATH` (default: `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Folder relative paths resolve from (default: the current directory). */
  cwd?: string;
  /** Trajectories per step written to `samples.jsonl` (default 4). */
  samplesPerStep?: number;
  /**
   * Under `runtime_monitor.exception_handling.policy: continue`, a group left with fewer
   * productive rollouts is dropped (default 2 when `data.rollout_repeat_n` > 1, else 1).
   */
  minGroupSize?: number;
}

/** Why a run folder is being (re)used, for the session log. */
interface Session {
  startedAt: string;
  start: StartPlan["kind"];
  from?: string;
}

async function readSessions(dir: string): Promise<Session[]> {
  try {
    const value = JSON.parse(await readFile(join(dir, "run.json"), "utf8")) as { sessions?: Session[] };
    return Array.isArray(value.sessions) ? value.sessions : [];
  } catch {
    return [];
  }
}

/** Decides how the run starts from `resume:` and what the checkpoint folder holds. */
async function planStart(recipe: LoadedRecipe, checkpointDir: string, cwd: string): Promise<StartPlan> {
  const { mode, resume_path: resumePath, resume_dataloader: exact } = recipe.config.resume;
  if (mode === "disable") return { kind: "fresh" };
  let path: string | undefined;
  if (mode === "auto") {
    path = (await listRunStates(checkpointDir)).at(-1)?.path;
    if (path === undefined) return { kind: "fresh" };
  } else {
    const besideRecipe = resolve(recipe.dir, resumePath);
    path = await locateRunState((await exists(besideRecipe)) ? besideRecipe : resolve(cwd, resumePath));
  }
  const state = await readRunState(path);
  return mode === "from_path" && !exact ? { kind: "warm_start", state, path } : { kind: "resume", state, path };
}

function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Trains a recipe: loads it (a path to a YAML or TS recipe, or a recipe from `loadRecipe`), opens
 * its services, and runs the loop — rollouts through the recipe's workers, batches from the
 * trajectory pool, the trainer's steps, weight sync, validation, metrics and checkpoints — until
 * `trainer.total_train_steps`, an abort through `options.signal`, or the end of the data.
 *
 * The output folder (`options.outputDir`, else `<NEXRL_STORAGE_PATH or ./runs>/<tag>`) receives
 * `config.resolved.yaml` (secrets redacted), `metrics.jsonl` (one flat object per step),
 * `samples.jsonl` (a few decoded trajectories per step), `checkpoints/` (run states, and the
 * local engine's files) and `run.json` (its sessions). With `resume.mode: auto` a run continues
 * from the latest checkpoint in that folder, rewriting the metrics of steps after it.
 *
 * @example
 * ```ts
 * const result = await runRecipe("recipe/pig_latin/local.yaml", { tag: "demo", overrides: ["trainer.total_train_steps=10"] });
 * console.log(result.metrics.at(-1)?.["train/loss"]);
 * ```
 * @throws RecipeError for an invalid recipe, and the pipeline's errors (`RolloutError`,
 * `TrainerError`, `RunSetupError`, `DataLoaderError`, `BackendNotAvailableError`) when the run
 * cannot go on.
 */
export async function runRecipe(recipe: string | LoadedRecipe, options: RunRecipeOptions = {}): Promise<RunResult> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  if (typeof recipe !== "string" && options.overrides?.length) {
    throw new NexrlError(
      "overrides apply when the recipe is given by path; apply them with loadRecipe(path, { overrides }) instead",
    );
  }
  const loaded =
    typeof recipe === "string"
      ? await loadRecipe(recipe, { ...(options.overrides && { overrides: options.overrides }), env, cwd })
      : recipe;
  const { config } = loaded;
  const outputDir = resolveRunDirectory({
    ...(options.tag !== undefined && { tag: options.tag }),
    ...(options.outputDir !== undefined && { outputDir: options.outputDir }),
    env,
    cwd,
  });
  const checkpointDir = config.trainer.checkpoint_path
    ? resolve(cwd, config.trainer.checkpoint_path)
    : join(outputDir, "checkpoints");
  await mkdir(outputDir, { recursive: true });
  const start = await planStart(loaded, checkpointDir, cwd);
  const sessions = await readSessions(outputDir);
  const progress = options.progress
    ? new ProgressPrinter(options.progress, config.trainer.total_train_steps)
    : undefined;
  const emit = (event: RunEvent): void => {
    if (progress) report(progress, event);
    options.onEvent?.(event);
  };
  if (start.kind !== "resume") {
    const stale = await listRunStates(checkpointDir);
    if (sessions.length > 0 || stale.length > 0)
      emit({
        type: "warning",
        message: `${outputDir} held an earlier run; starting afresh replaces its metrics, samples and run states`,
      });
    await Promise.all(stale.map((s) => rm(s.path, { force: true })));
  }
  await writeFile(join(outputDir, "config.resolved.yaml"), stringify(redactSecrets(config, env)));
  await writeFile(
    join(outputDir, "run.json"),
    `${JSON.stringify({ recipe: loaded.path, sessions: [...sessions, { startedAt: new Date().toISOString(), start: start.kind, ...(start.kind !== "fresh" && { from: start.path }) }] }, null, 1)}\n`,
  );
  try {
    return await executeRun({
      recipe: loaded,
      outputDir,
      checkpointDir,
      start,
      session: sessions.length,
      signal: options.signal,
      emit,
      samplesPerStep: options.samplesPerStep ?? 4,
      minGroupSize: options.minGroupSize,
      env,
    });
  } finally {
    progress?.end();
  }
}

const START_WORDS = { fresh: "starting", resume: "resuming from", warm_start: "starting from the weights of" } as const;

function report(progress: ProgressPrinter, event: RunEvent): void {
  switch (event.type) {
    case "start":
      progress.message(
        `${START_WORDS[event.start]}${event.from ? ` ${event.from}` : ""}: step ${event.fromStep} of ${event.totalSteps}, outputs in ${event.outputDir}`,
      );
      break;
    case "step":
      progress.step(event.step, event.metrics);
      break;
    case "validation":
      progress.message(
        `validation at step ${event.step}: reward ${event.metrics["val/reward_mean"]?.toFixed(3) ?? "-"} over ${event.metrics["val/num_samples"]} samples`,
      );
      break;
    case "checkpoint":
      progress.message(`checkpoint at step ${event.step}: ${event.path}`);
      break;
    case "warning":
      progress.message(`warning: ${event.message}`);
      break;
    case "end":
      progress.message(
        `${event.reason === "completed" ? "done" : event.reason === "aborted" ? "stopped (resume with resume.mode=auto)" : "data exhausted"} after step ${event.step}`,
      );
      break;
  }
}
