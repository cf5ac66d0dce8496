/**
 * {@link runRecipe}: the training pipeline's entry point.
 * @module
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { stringify } from "yaml";
import { loadRecipe, type LoadedRecipe } from "../recipe/load.js";
import { redactSecrets, secretRedactor, shortSecretWarnings } from "../recipe/redact.js";
import { listRunStates, readRunState, removeTemporaries } from "../outputs/checkpoint.js";
import type { RunEvent, RunInit, RunOutputs, RunResult } from "../outputs/events.js";
import { formatFailure } from "../outputs/failures.js";
import { prepareInit, type StartPlan } from "./init-stage.js";
import { ProgressPrinter, type ProgressOutput } from "../outputs/progress.js";
import { formatValidationExamples } from "../rollouts/validation-examples.js";
import {
  checkResumeSettings,
  describeChanges,
  runSettings,
  unknownAllowedSettings,
  type RunSettings,
} from "../outputs/resume-settings.js";
import { resolveRunDirectory } from "../outputs/run-dir.js";
import { RunLock } from "./run-lock.js";
import { formatRunSummary, summarizeMetrics } from "../outputs/run-summary.js";
import { locateResumeState, prepareRun } from "./preflight.js";
import { executeRun, type LoopResult } from "./training-run.js";
import { NexrlError } from "../errors.js";

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
  /**
   * Where progress is printed (a live line on a terminal; with `console` in `logger.backend`, a
   * line per step) and, at the end, the run's summary ({@link formatRunSummary}); false for none
   * (default: none).
   */
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
  const { mode, resume_dataloader: exact } = recipe.config.resume;
  if (mode === "disable") return { kind: "fresh" };
  let path: string | undefined;
  if (mode === "auto") {
    path = (await listRunStates(checkpointDir)).at(-1)?.path;
    if (path === undefined) return { kind: "fresh" };
  } else {
    path = await locateResumeState(recipe, cwd);
  }
  const state = await readRunState(path);
  return mode === "from_path" && !exact ? { kind: "warm_start", state, path } : { kind: "resume", state, path };
}

/**
 * Trains a recipe: loads it (a path to a YAML or TS recipe, or a recipe from `loadRecipe`), opens
 * its services, and runs the loop — rollouts through the recipe's workers, batches from the
 * trajectory pool, the trainer's steps, weight sync, validation, metrics and checkpoints — until
 * `trainer.total_train_steps`, an abort through `options.signal`, or the end of the data.
 *
 * The output folder (`options.outputDir`, else `<NEXRL_STORAGE_PATH or ./runs>/<tag>`) receives
 * `config.resolved.yaml` (secrets redacted), `metrics.jsonl` (one flat object per step),
 * `samples.jsonl` (a few decoded trajectories per step), `failures.jsonl` (every failed rollout
 * attempt), `checkpoints/` (run states, and the local engine's files) and `run.json` (its
 * sessions); paths inside it are stored relative to it, so it can be moved or copied. With
 * `resume.mode: auto` a run continues from the latest checkpoint in that folder, rewriting the
 * metrics of steps after it; a resume whose recipe changes the data order or the algorithm is
 * refused unless `resume.allow_changed` lists the settings. Secrets are redacted from every file
 * and event.
 *
 * While it runs, the run holds a lock on the folder (`.nexrl.lock`: a second run is refused with
 * `RunError`; a lock left by a dead process is taken over), and handles the
 * process's uncaught exceptions and unhandled rejections (one raised by a rollout's code fails
 * that rollout under the failure policy; any other stops the run) and a process left with nothing
 * to do while it waits (hung rollouts fail with `UserCodeError`; otherwise the run stops with
 * `RunError`). A run stopped by an error saves a checkpoint of its last finished step
 * first when it can. Nothing is written before the recipe's modules and data have loaded.
 *
 * The result holds every metrics row, the run's summary (first → last figures, best validation,
 * tokens and costs, failures: {@link summarizeMetrics}) and where its outputs are; with
 * `options.progress`, {@link formatRunSummary} prints them at the end.
 *
 * @example
 * ```ts
 * const result = await runRecipe("recipe/pig_latin/local.yaml", { tag: "demo", overrides: ["trainer.total_train_steps=10"] });
 * console.log(result.metrics.at(-1)?.["train/loss"], result.summary.bestValidation);
 * ```
 * @throws `RecipeError` for an invalid recipe (schema, modules, data, the start-up checks).
 * @throws `RunError` when the run cannot start, resume or go on; its `problem` says why: its
 * output folder (`output_dir`, `locked`, `run_folder`), a checkpoint it cannot resume
 * (`resume_settings`), a step with no successful rollout (`no_successful_rollout`), user code
 * that never settled (`stalled`), the service (`backend`) or the rest of start-up (`setup`).
 * @throws `RolloutError` for a failed rollout the failure policy does not skip.
 * @throws `UserCodeError` for an error in user code outside a rollout (a trainer's, say).
 * @throws `InputError` for a trajectory or datum the model cannot take.
 */
export function runRecipe(recipe: string | LoadedRecipe, options: RunRecipeOptions = {}): Promise<RunResult> {
  return runInChain(recipe, options, []);
}

/** {@link runRecipe}, for a recipe that `chain` (outer first) runs as its `init.from_recipe` warm start. */
async function runInChain(
  recipe: string | LoadedRecipe,
  options: RunRecipeOptions,
  chain: readonly string[],
): Promise<RunResult> {
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
  const redact = secretRedactor(config, env);
  const outputDir = resolveRunDirectory({
    ...(options.tag !== undefined && { tag: options.tag }),
    ...(options.outputDir !== undefined && { outputDir: options.outputDir }),
    env,
    cwd,
  });
  const checkpointDir = config.trainer.checkpoint_path
    ? resolve(cwd, config.trainer.checkpoint_path)
    : join(outputDir, "checkpoints");
  const progress = options.progress
    ? new ProgressPrinter(redactingOutput(options.progress, redact), config.trainer.total_train_steps, {
        steps: config.logger.backend.includes("console"),
        // Trajectories built from the rows (SFT) all have the reward their worker gives them: no signal to show.
        reward: config.rollout_worker.need_llm_inference,
      })
    : undefined;
  const emit = (event: RunEvent): void => {
    const safe = event.type === "warning" ? { ...event, message: redact(event.message) } : event;
    if (progress) report(progress, safe);
    options.onEvent?.(safe);
  };
  // Ends the agent gateway the worker class may have started.
  const stop = new AbortController();
  let lock: RunLock | undefined;
  try {
    // User modules, the tokenizer and the data load before anything is written: a recipe they
    // refuse leaves no trace. `nexrl validate` makes the same checks.
    const prepared = await prepareRun(loaded, stop.signal);
    for (const message of prepared.notes) emit({ type: "warning", message });
    const backend = config.service.train_service.backend;
    for (const message of shortSecretWarnings(
      config,
      env,
      backend === "local" ? [] : [`${backend.toUpperCase()}_API_KEY`],
    ))
      emit({ type: "warning", message });
    // A distributed run whose Redis server cannot be reached is refused before its folder exists.
    const distributed = config.rollout_worker.distributed;
    if (distributed) await (await import("../distributed/redis.js")).checkRedis(distributed.url);
    // The command line may hold a secret given as an override.
    lock = await RunLock.acquire(outputDir, redact(process.argv.join(" ")));
    const leftovers = await removeTemporaries(outputDir, checkpointDir);
    if (leftovers.length > 0)
      emit({
        type: "warning",
        message: `removed ${leftovers.length === 1 ? "a half-written file" : `${leftovers.length} half-written files`} an earlier run left when it stopped mid-write: ${leftovers.map((p) => relative(outputDir, p)).join(", ")}`,
      });
    let start = await planStart(loaded, checkpointDir, cwd);
    let init: RunInit | undefined;
    if (start.kind === "fresh" && config.init != null) {
      const outcome = await prepareInit(loaded, {
        env,
        cwd,
        emit,
        chain,
        run: (child, outputDir) =>
          runInChain(child, { ...options, outputDir, onEvent: undefined, overrides: undefined, tag: undefined }, [
            ...chain,
            loaded.path,
          ]),
      });
      if (outcome.kind === "stopped") return outcome.result;
      ({ plan: start, init } = outcome);
    }
    const settings = await runSettings(config);
    if (start.kind === "resume") checkSettings(start, settings, config.resume.allow_changed, emit);
    const sessions = await readSessions(outputDir);
    const beforeWrites = async (): Promise<void> => {
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
      const session: Session = {
        startedAt: new Date().toISOString(),
        start: start.kind,
        ...(start.kind !== "fresh" && { from: insideRunFolder(start.path, outputDir) }),
      };
      await writeFile(
        join(outputDir, "run.json"),
        `${JSON.stringify({ recipe: loaded.path, sessions: [...sessions, session] }, null, 1)}\n`,
      );
    };
    const looped = await executeRun({
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
      redact,
      settings,
      prepared,
      beforeWrites,
    });
    // The run is over: the agent gateway offers no more tasks.
    stop.abort();
    const result: RunResult = {
      ...looped,
      summary: summarizeMetrics(
        looped.metrics,
        config.trainer.total_train_steps,
        config.rollout_worker.need_llm_inference,
      ),
      outputs: await runOutputs(looped, loaded, checkpointDir),
      ...(init && { init }),
    };
    if (progress) {
      progress.end();
      progress.print(formatRunSummary(result, { cwd }));
    }
    return result;
  } catch (error) {
    throw redactError(error, redact);
  } finally {
    progress?.end();
    stop.abort();
    await lock?.release();
  }
}

/** Where the outputs of a finished run are. */
async function runOutputs(looped: LoopResult, recipe: LoadedRecipe, checkpointDir: string): Promise<RunOutputs> {
  const dir = looped.outputDir;
  const failures = join(dir, "failures.jsonl");
  const failureRows = (await readFile(failures, "utf8").catch(() => ""))
    .split("\n")
    .filter((line) => line.trim() !== "").length;
  const { config } = recipe;
  const { backend } = config.service.train_service;
  // The local engine snapshots the weights of every step it syncs to the sampler.
  const sampleable =
    looped.lastCheckpoint !== undefined || (backend === "local" && config.rollout_worker.need_llm_inference);
  return {
    runDir: dir,
    recipe: recipe.path,
    metrics: join(dir, "metrics.jsonl"),
    samples: join(dir, "samples.jsonl"),
    checkpoints: checkpointDir,
    failures: failureRows > 0 ? { path: failures, rows: failureRows } : undefined,
    sampleable,
    exportFormat:
      backend === "local" && sampleable
        ? "both"
        : backend === "tinker" && looped.lastCheckpoint !== undefined
          ? "peft"
          : undefined,
  };
}

/** Refuses a resume whose recipe changed settings the checkpoint recorded, unless `allowed`; warns about what `allowed` accepted. */
function checkSettings(
  start: Extract<StartPlan, { kind: "resume" }>,
  settings: RunSettings,
  allowed: readonly string[],
  emit: (event: RunEvent) => void,
): void {
  const recorded = start.state.settings;
  if (recorded === undefined) return;
  const accepted = checkResumeSettings(start.path, recorded, settings, allowed);
  if (accepted.length > 0)
    emit({
      type: "warning",
      message: `resuming with changed settings, as resume.allow_changed allows: ${describeChanges(accepted)}`,
    });
  const unknown = unknownAllowedSettings(allowed, recorded, settings);
  if (unknown.length > 0)
    emit({
      type: "warning",
      message: `resume.allow_changed names ${unknown.join(", ")}, which ${unknown.length === 1 ? "is not a setting" : "are not settings"} a resume compares (a typo?)`,
    });
}

/** `path` relative to the run folder (`./checkpoints/…`) when inside it, else as it is. */
function insideRunFolder(path: string, runDir: string): string {
  const inside = relative(runDir, path);
  return inside === "" || inside.startsWith("..") || isAbsolute(inside) ? path : `./${inside.split(sep).join("/")}`;
}

/** A progress output whose text has secrets removed. */
function redactingOutput(out: ProgressOutput, redact: (text: string) => string): ProgressOutput {
  return { write: (text: string) => out.write(redact(text)), ...(out.isTTY !== undefined && { isTTY: out.isTTY }) };
}

/** `error` with secrets removed from its message and stack, and from its causes'. */
function redactError(error: unknown, redact: (text: string) => string): unknown {
  for (let e = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    e.message = redact(e.message);
    if (e.stack !== undefined) e.stack = redact(e.stack);
  }
  return error;
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
      progress.step(event.step, event.metrics, event.skipped);
      break;
    case "validation":
      progress.message(
        `validation at step ${event.step}: ${event.metrics["val/nll"] === undefined ? "" : `nll ${event.metrics["val/nll"].toFixed(3)} per target token, `}reward ${event.metrics["val/reward_mean"]?.toFixed(3) ?? "-"} over ${event.metrics["val/num_samples"]} samples`,
      );
      for (const line of formatValidationExamples(event.examples ?? [])) progress.message(line);
      break;
    case "checkpoint":
      progress.message(`checkpoint at step ${event.step}: ${event.path}`);
      break;
    case "init":
      progress.message(
        event.phase === "start"
          ? `warm start (init.from_recipe): running ${event.recipe} first, into ${event.runDir} (reused by later runs while its recipe, data and modules are unchanged)`
          : event.phase === "reused"
            ? `warm start (init.from_recipe): reusing ${event.runDir}, the run of ${event.recipe} with the same recipe, data and modules (delete the folder to run it again)`
            : `warm start done: training from the weights of ${event.checkpoint}`,
      );
      break;
    case "warning":
      progress.message(`warning: ${event.message}`);
      break;
    case "rollout_failure":
      if (event.firstOfKind) progress.message(`warning: ${formatFailure(event.failure)}`);
      break;
    case "end":
      progress.message(
        `${event.reason === "completed" ? "done" : event.reason === "aborted" ? "stopped (resume with resume.mode=auto)" : "data exhausted"} after step ${event.step}`,
      );
      break;
  }
}
