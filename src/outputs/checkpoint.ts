/**
 * Run-state files: what a checkpoint holds besides the model (step, data cursor, sampler, pool),
 * and how the latest one is found.
 * @module
 */
import { readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { DataCursor } from "../data/data-loader.js";
import type { PoolState } from "../rollouts/pool.js";
import type { RunSettings } from "./resume-settings.js";
import type { SamplerState } from "../rollouts/weight-sync.js";
import { crc32 } from "../engine/crc32.js";
import { isTemporaryName, makeFolder } from "../engine/storage.js";
import { RunError, storageError } from "../errors.js";

/**
 * Everything needed to continue a run exactly where a checkpoint was taken. In memory, file
 * paths are absolute; the file stores those inside the run folder relative to it (`./…`), so a
 * run folder can be moved or copied and resumed, and a copy uses its own files.
 */
export interface RunState {
  /** Marks the file. */
  format: "nexrl.run-state";
  /** Layout version: 2 stores paths relative to the run folder and the run's settings; 1 (read only) absolute paths. */
  version: 1 | 2;
  /** Training steps completed. */
  step: number;
  /** The session (start or resume) of the run that wrote it. */
  session: number;
  /** The training-service path of the weights and optimizer state (`saveState`). */
  trainingState: string;
  /** The sampler the rollouts were using. */
  sampler: SamplerState;
  /** Sampler path of the weights the run started from (the KL reference). */
  initialSamplerPath: string;
  /** The training data's position; all randomness derives from `seed` and positions. */
  data: DataCursor;
  /** Trajectories collected and not yet trained on. */
  pool: PoolState;
  /** The run seed (`data.seed`). */
  seed: number;
  /** Training backend and base model, to refuse resuming with another model. */
  model: { backend: string; name: string };
  /** The settings a resume must keep (see `runSettings`); absent in version 1. */
  settings?: RunSettings;
  /** When it was written (ISO 8601). */
  savedAt: string;
}

const STATE_FILE = /^step_(\d{6,})\.json$/;
/** What {@link writeRunState} writes before moving it into place. */
const STATE_TEMPORARY = /^step_\d{6,}\.json\.tmp$/;

/** File name of the run state after `step`: `step_000003.json`. */
export function runStateFileName(step: number): string {
  return `step_${String(step).padStart(6, "0")}.json`;
}

/** What a version 2 file holds besides the state: where the run folder is, from the file's folder, and a checksum. */
interface StoredRunState extends RunState {
  /** The run folder, relative to the folder of the run-state file (`..` for `<run>/checkpoints/`). */
  runDir?: string;
  /**
   * `crc32:<8 hex digits>` of the file's JSON without this key (as {@link runStateText} writes it);
   * absent in files written before nexrl checksummed run states, which load unchecked.
   */
  checksum?: string;
}

/** The text of a run-state file holding `stored` (without its checksum key). */
const runStateText = (stored: StoredRunState): string => `${JSON.stringify(stored, null, 1)}\n`;

/** The checksum of a run-state file holding `stored`. */
const runStateChecksum = (stored: StoredRunState): string =>
  `crc32:${crc32(new TextEncoder().encode(runStateText(stored)))
    .toString(16)
    .padStart(8, "0")}`;

/** `path` as stored: relative to `runDir` (`./checkpoints/step_000002.nxs`) when inside it, else unchanged (service paths, presets, other folders). */
function storedPath(path: string, runDir: string): string {
  if (!isAbsolute(path)) return path;
  const inside = relative(runDir, path);
  if (inside === "" || inside.startsWith("..") || isAbsolute(inside)) return path;
  return `./${inside.split(sep).join("/")}`;
}

/** A stored path back to an absolute one. */
const loadedPath = (path: string, runDir: string): string => (path.startsWith("./") ? resolve(runDir, path) : path);

/** `state` with its file paths mapped by `map`. */
function mapPaths(state: RunState, map: (path: string) => string): RunState {
  return {
    ...state,
    trainingState: map(state.trainingState),
    sampler: { ...state.sampler, path: map(state.sampler.path) },
    initialSamplerPath: map(state.initialSamplerPath),
  };
}

/**
 * Writes `state` into `dir` atomically (a killed process leaves the previous file intact) and
 * returns its path. Paths inside `runDir`, the run folder, are stored relative to it.
 */
export async function writeRunState(dir: string, state: RunState, runDir: string): Promise<string> {
  const path = join(dir, runStateFileName(state.step));
  const stored: StoredRunState = {
    ...mapPaths({ ...state, version: 2 }, (p) => storedPath(p, runDir)),
    runDir: relative(dir, runDir).split(sep).join("/") || ".",
  };
  try {
    await makeFolder(dir);
    await writeFile(`${path}.tmp`, runStateText({ ...stored, checksum: runStateChecksum(stored) }));
    await rename(`${path}.tmp`, path);
  } catch (error) {
    await rm(`${path}.tmp`, { force: true });
    throw storageError(path, error);
  }
  return path;
}

/**
 * Deletes a run-state file and, when its training state is a file on this machine (the local
 * engine's), that file too. Remote checkpoints are left to the service's own lifetime rules.
 */
export async function removeRunState(path: string): Promise<void> {
  const state = await readRunState(path);
  if ((await stat(state.trainingState).catch(() => undefined))?.isFile())
    await rm(state.trainingState, { force: true });
  await rm(path, { force: true });
}

/**
 * Reads a run-state file, checking its checksum when it has one (files from before nexrl wrote
 * checksums have none and load unchecked).
 * @throws {@link "nexrl/errors".RunError | RunError} when it is missing or not a nexrl run state, and of problem
 * `damaged_checkpoint` when its checksum does not match its contents.
 */
export async function readRunState(path: string): Promise<RunState> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    throw new RunError(
      `cannot read the run state ${path}: ${(error as Error).message}; if the file was damaged, delete it to resume from an earlier checkpoint`,
      { code: "setup", cause: error },
    );
  }
  const state = value as Partial<StoredRunState> | null;
  // Checked first: a damaged file should say so, not that a key it holds is wrong.
  if (typeof state === "object" && state !== null && "checksum" in state) await checkRunStateChecksum(path, state);
  if (
    state?.format !== "nexrl.run-state" ||
    (state.version !== 1 && state.version !== 2) ||
    !Number.isInteger(state.step) ||
    typeof state.trainingState !== "string" ||
    typeof state.sampler?.path !== "string" ||
    typeof state.initialSamplerPath !== "string"
  ) {
    throw new RunError(
      `${path} is not a nexrl run state (expected a step_NNNNNN.json file written by a checkpoint); if the file was damaged, delete it to resume from an earlier checkpoint`,
      { code: "setup" },
    );
  }
  const { runDir, checksum: _checksum, ...rest } = state as StoredRunState;
  if (rest.version === 1) return rest;
  const folder = resolve(dirname(path), runDir ?? "..");
  return mapPaths(rest, (p) => loadedPath(p, folder));
}

/**
 * Checks the checksum of the run-state file `path`, which holds `file`.
 * @throws {@link "nexrl/errors".RunError | RunError} of problem `damaged_checkpoint` when it does not match.
 */
async function checkRunStateChecksum(path: string, file: Partial<StoredRunState>): Promise<void> {
  const { checksum, ...stored } = file;
  if (checksum === runStateChecksum(stored as StoredRunState)) return;
  const step = Number(STATE_FILE.exec(basename(path))?.[1] ?? Infinity);
  const earlier = (await listRunStates(dirname(path))).filter((entry) => entry.step < step).at(-1);
  const wayOut = earlier
    ? `resume from the checkpoint before it: delete ${path} (a resume then takes ${earlier.path}), or set resume.resume_path to ${earlier.path}`
    : `no earlier checkpoint is in ${dirname(path)}: delete ${path} and start the run again`;
  throw new RunError(
    `the run state ${path} is damaged: its checksum does not match its contents (the file was changed or cut after the checkpoint wrote it); ${wayOut}`,
    { code: "damaged_checkpoint" },
  );
}

/**
 * Removes the half-written files a process stopped mid-write (killed, or out of disk space)
 * left in the run folder `runDir` (its `checkpoints/` and `sampler_weights/`) and in the
 * checkpoint folder `checkpointDir`; returns their paths. Only the run holding the folder's
 * lock writes there, so none of them is being written.
 */
export async function removeTemporaries(runDir: string, checkpointDir: string): Promise<string[]> {
  const folders = new Set([join(runDir, "checkpoints"), join(runDir, "sampler_weights"), checkpointDir]);
  const removed: string[] = [];
  for (const dir of folders) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names.filter((n) => isTemporaryName(n) || STATE_TEMPORARY.test(n))) {
      await rm(join(dir, name), { force: true });
      removed.push(join(dir, name));
    }
  }
  return removed;
}

const STEP_SNAPSHOT = /^step_\d{6,}(?:-s\d+)?\.nxw$/;

/**
 * Deletes the local engine's step snapshots in `runDir/sampler_weights/` other than those in
 * `keep` (the sampler the kept checkpoint records and the one in use) and returns how many. The
 * `initial` snapshots stay: a resume's reference model reads them. Remote samplers are not files
 * here and are left to the service's own lifetime rules.
 */
export async function pruneSamplerSnapshots(runDir: string, keep: readonly string[]): Promise<number> {
  const dir = join(runDir, "sampler_weights");
  const kept = new Set(keep.map((path) => resolve(path)));
  const names = await readdir(dir).catch(() => [] as string[]);
  const stale = names.filter((name) => STEP_SNAPSHOT.test(name) && !kept.has(join(dir, name)));
  await Promise.all(stale.map((name) => rm(join(dir, name), { force: true })));
  return stale.length;
}

/** The run-state files in `dir`, oldest step first. */
export async function listRunStates(dir: string): Promise<Array<{ step: number; path: string }>> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names
    .map((name) => ({ match: STATE_FILE.exec(name), name }))
    .filter((entry) => entry.match !== null)
    .map((entry) => ({ step: Number(entry.match![1]), path: join(dir, entry.name) }))
    .sort((a, b) => a.step - b.step);
}

/**
 * The run-state file `path` names: the file itself, or the latest one in a checkpoint folder or
 * in the `checkpoints/` folder of a run folder.
 * @throws {@link "nexrl/errors".RunError | RunError} when there is none.
 */
export async function locateRunState(path: string): Promise<string> {
  const info = await stat(path).catch(() => undefined);
  if (info?.isFile()) return path;
  if (info?.isDirectory()) {
    for (const dir of [path, join(path, "checkpoints")]) {
      const latest = (await listRunStates(dir)).at(-1);
      if (latest) return latest.path;
    }
    throw new RunError(
      `no checkpoint in ${path}: it holds no step_NNNNNN.json run state (nor does its checkpoints/ folder)`,
      { code: "setup" },
    );
  }
  throw new RunError(
    `resume.resume_path ${path} does not exist; point it at a run folder, its checkpoints/ folder or a step_NNNNNN.json file`,
    { code: "setup" },
  );
}
