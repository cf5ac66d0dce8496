/**
 * The warm start a recipe asks for with `init:`: a checkpoint's weights, or another recipe run
 * first into a folder named by the fingerprint of its inputs, and reused while they are unchanged.
 * @module
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";
import { basename, extname, join, relative, resolve } from "node:path";
import { loadRecipe, type LoadedRecipe } from "../recipe/load.js";
import { parseModuleReference } from "../recipe/module-ref.js";
import { locateRunState, readRunState, type RunState } from "../outputs/checkpoint.js";
import { RunError } from "../errors.js";
import type { RunEvent, RunInit, RunResult } from "../outputs/events.js";
import { storageRoot } from "../outputs/run-dir.js";

/** How a run starts: fresh, continuing a checkpoint exactly, or from a checkpoint's weights only. */
export type StartPlan =
  | { readonly kind: "fresh" }
  | { readonly kind: "resume"; readonly state: RunState; readonly path: string }
  | { readonly kind: "warm_start"; readonly state: RunState; readonly path: string };

/** The file an `init.from_recipe` run folder gets once that run has finished: what the fingerprint was and which checkpoint to start from. */
const DONE_FILE = "init.json";

/** What {@link DONE_FILE} holds. */
interface InitDone {
  /** The fingerprint of the recipe's inputs when it ran. */
  fingerprint: string;
  /** Its final run-state file, relative to the run folder. */
  checkpoint: string;
}

/** Hex digits of the fingerprint in the folder name. */
const SHORT = 12;

/** Adds a file's content to `hash` (nothing when it is not a file). */
async function hashFile(hash: ReturnType<typeof createHash>, path: string): Promise<void> {
  if (!(await stat(path).catch(() => undefined))?.isFile()) return;
  hash.update(`\0file ${path}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/**
 * The fingerprint of what a recipe's run depends on: the resolved recipe (every key, after
 * composition, overrides and interpolation), the content of its data files (training and
 * validation) and of the modules it names (worker, agent, evaluator, trainer). Editing any of them
 * changes it; files those modules import are not followed.
 */
export async function recipeFingerprint(recipe: LoadedRecipe): Promise<string> {
  const { config } = recipe;
  const hash = createHash("sha256");
  hash.update(JSON.stringify(config));
  const worker = config.rollout_worker;
  const files = [
    ...(config.data.data_files ?? []),
    ...(config.validate.data?.data_files ?? []),
    worker.custom_rollout_worker_module_path,
    worker.evaluator_module_path === undefined
      ? undefined
      : parseModuleReference(worker.evaluator_module_path).modulePath,
    // The agent module is resolved when the worker class loads: beside the recipe (as tried first there).
    worker.agent_module_path == null ? undefined : resolve(recipe.dir, worker.agent_module_path),
    config.trainer.custom_trainer_module_path,
  ];
  for (const file of files) if (file !== undefined) await hashFile(hash, file);
  return hash.digest("hex");
}

/** The name of a recipe file without its extension (`sft_local` for `sft_local.ts`). */
const stem = (path: string): string => basename(path, extname(path));

/** What {@link prepareInit} needs from the run that asks for a warm start. */
export interface InitContext {
  /** Environment of the recipes (and `NEXRL_STORAGE_PATH`). */
  env: Readonly<Record<string, string | undefined>>;
  /** Folder relative paths resolve from. */
  cwd: string;
  /** Receives the stage's events. */
  emit(event: RunEvent): void;
  /** Runs a recipe (the warm-start recipe) into `outputDir`, with its own progress. */
  run(recipe: LoadedRecipe, outputDir: string): Promise<RunResult>;
  /** The recipes that led here (outer first), to refuse a cycle of `init.from_recipe`. */
  chain: readonly string[];
}

/** The run state a checkpoint path of `recipe` names: beside the recipe first, then from `cwd`. */
export async function locateRecipeCheckpoint(recipe: LoadedRecipe, path: string, cwd: string): Promise<string> {
  const beside = resolve(recipe.dir, path);
  return locateRunState((await stat(beside).catch(() => undefined)) ? beside : resolve(cwd, path));
}

/**
 * Refuses an `init.from_recipe` chain that comes back to a recipe already in it.
 * @param chain the recipes that led here, outer first, the one naming `file` last.
 * @throws {@link "nexrl/errors".RunError | RunError} naming the cycle.
 */
export function refuseInitCycle(chain: readonly string[], file: string, cwd: string): void {
  if (chain.includes(file))
    throw new RunError(
      `init.from_recipe forms a cycle: ${[...chain, file].map((p) => relative(cwd, p) || p).join(" → ")}; a warm-start recipe cannot start from itself`,
      { code: "setup" },
    );
}

/** The warm start a fresh run makes from `init:`, or the warm-start recipe's own result when that run was stopped. */
export type InitOutcome =
  | { readonly kind: "start"; readonly plan: Extract<StartPlan, { kind: "warm_start" }>; readonly init: RunInit }
  | { readonly kind: "stopped"; readonly result: RunResult };

/**
 * Prepares the warm start `recipe.config.init` asks for. `from_checkpoint` names a checkpoint
 * (beside the recipe first, then in the current folder). `from_recipe` runs that recipe into
 * `<storage root>/init/<name>-<fingerprint>/` unless a finished run of it is there already (then
 * reused as it is); a run of it that was stopped before it finished is continued from its last
 * checkpoint.
 * @throws {@link "nexrl/errors".RunError | RunError} for a missing checkpoint, a cycle of recipes, or a warm-start
 * recipe that saved no checkpoint.
 */
export async function prepareInit(recipe: LoadedRecipe, context: InitContext): Promise<InitOutcome> {
  const init = recipe.config.init!;
  if (init.from_checkpoint !== undefined) {
    const path = await locateRecipeCheckpoint(recipe, init.from_checkpoint, context.cwd);
    return {
      kind: "start",
      plan: { kind: "warm_start", state: await readRunState(path), path },
      init: { checkpoint: path },
    };
  }
  const file = init.from_recipe!;
  refuseInitCycle([...context.chain, recipe.path], file, context.cwd);
  const child = await loadRecipe(file, { env: context.env, cwd: context.cwd });
  const fingerprint = await recipeFingerprint(child);
  const runDir = join(storageRoot(context), "init", `${stem(file)}-${fingerprint.slice(0, SHORT)}`);
  const done = await readDone(runDir, fingerprint);
  if (done !== undefined) {
    context.emit({ type: "init", phase: "reused", recipe: file, runDir, checkpoint: done });
    return {
      kind: "start",
      plan: await warmStart(done),
      init: { checkpoint: done, recipe: file, runDir, reused: true },
    };
  }
  context.emit({ type: "init", phase: "start", recipe: file, runDir });
  // A run of it stopped halfway (Ctrl-C) continues from its last checkpoint: the folder's name says its inputs are the same.
  if (child.config.resume.mode === "disable") child.config.resume = { ...child.config.resume, mode: "auto" };
  const result = await context.run(child, runDir);
  if (result.stopReason === "aborted") return { kind: "stopped", result };
  if (result.lastCheckpoint === undefined)
    throw new RunError(
      `init.from_recipe ${file} saved no checkpoint to start from; remove \`trainer.save_final: false\` from it`,
      { code: "setup" },
    );
  const stored: InitDone = { fingerprint, checkpoint: relative(runDir, result.lastCheckpoint) };
  await writeFile(join(runDir, DONE_FILE), `${JSON.stringify(stored, null, 1)}\n`);
  context.emit({ type: "init", phase: "done", recipe: file, runDir, checkpoint: result.lastCheckpoint });
  return {
    kind: "start",
    plan: await warmStart(result.lastCheckpoint),
    init: { checkpoint: result.lastCheckpoint, recipe: file, runDir, reused: false },
  };
}

/** The run-state file a finished warm-start run left in `runDir`, if it finished with these inputs and the file is still there. */
async function readDone(runDir: string, fingerprint: string): Promise<string | undefined> {
  try {
    const done = JSON.parse(await readFile(join(runDir, DONE_FILE), "utf8")) as Partial<InitDone>;
    if (done.fingerprint !== fingerprint || typeof done.checkpoint !== "string") return undefined;
    const checkpoint = resolve(runDir, done.checkpoint);
    return (await stat(checkpoint).catch(() => undefined))?.isFile() ? checkpoint : undefined;
  } catch {
    return undefined;
  }
}

async function warmStart(path: string): Promise<Extract<StartPlan, { kind: "warm_start" }>> {
  return { kind: "warm_start", state: await readRunState(path), path };
}
