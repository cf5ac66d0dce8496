/**
 * The weights a run folder holds: its checkpoints (run states) and, for the local engine, the
 * sampler snapshots written at each weight sync.
 * @module
 */
import { readdir, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { listRunStates, readRunState } from "../outputs/checkpoint.js";
import { configValue, type RunFolder } from "./read.js";

/** A checkpoint of the run: its run-state file, with the paths inside resolved. */
export interface RunCheckpoint {
  /** The step it holds. */
  step: number;
  /** Its run-state file (`step_NNNNNN.json`). */
  file: string;
  /** The training state (weights and optimizer): a file for the local engine, a service path otherwise. */
  trainingState: string;
  /** The sampler path the rollouts were using when it was taken. */
  samplerPath: string;
  /** The policy version of that sampler (it lags `step` when nothing sampled since). */
  samplerVersion: number;
  /** Training backend and base model. */
  model: {
    /** `local`, `tinker` or `weaver`. */
    backend: string;
    /** The base model's name. */
    name: string;
  };
  /** When it was written (ISO 8601). */
  savedAt: string;
}

/** A sampler snapshot the local engine wrote into `sampler_weights/`. */
export interface RunSnapshot {
  /** The step of its weights (0: the initial weights). */
  step: number;
  /** The `.nxw` file. */
  file: string;
}

/** Checkpoints and snapshots of a run, oldest step first. */
export interface RunWeights {
  /** The run's checkpoints. */
  checkpoints: RunCheckpoint[];
  /** The local engine's sampler snapshots of the current session chain (none for remote backends). */
  snapshots: RunSnapshot[];
}

const REMOTE_PATH = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * A path recorded inside a run folder, made usable: a service path (`tinker://…`) or an absolute
 * path as it is; a relative one from the run folder, else from `besideDir` (the folder of the
 * file that recorded it) when only that exists.
 */
export async function resolveRecordedPath(path: string, runDir: string, besideDir = runDir): Promise<string> {
  if (REMOTE_PATH.test(path) || isAbsolute(path)) return path;
  const fromRun = resolve(runDir, path);
  if (besideDir === runDir || (await stat(fromRun).catch(() => undefined))) return fromRun;
  const beside = resolve(besideDir, path);
  return (await stat(beside).catch(() => undefined)) ? beside : fromRun;
}

/** Folders that may hold the run's run states: `checkpoints/`, and `trainer.checkpoint_path` when set. */
function checkpointDirs(run: RunFolder): string[] {
  const dirs = [join(run.dir, "checkpoints")];
  const configured = configValue(run.config, "trainer.checkpoint_path");
  if (typeof configured === "string" && configured !== "") dirs.push(resolve(run.dir, configured));
  return [...new Set(dirs)];
}

async function readCheckpoints(run: RunFolder): Promise<RunCheckpoint[]> {
  const byStep = new Map<number, RunCheckpoint>();
  for (const dir of checkpointDirs(run)) {
    for (const { path } of await listRunStates(dir)) {
      const state = await readRunState(path);
      const beside = dirname(path);
      byStep.set(state.step, {
        step: state.step,
        file: path,
        trainingState: await resolveRecordedPath(state.trainingState, run.dir, beside),
        samplerPath: await resolveRecordedPath(state.sampler.path, run.dir, beside),
        samplerVersion: state.sampler.version,
        model: state.model,
        savedAt: state.savedAt,
      });
    }
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

const SNAPSHOT_FILE = /^(?:initial|step_(\d{6,}))(?:-s(\d+))?\.nxw$/;

/**
 * The snapshots of `sampler_weights/` written since the run last started afresh (a fresh start
 * replaces the run; later sessions name their files `-s<n>`), the latest session's file for each step.
 */
async function readSnapshots(run: RunFolder): Promise<RunSnapshot[]> {
  const dir = join(run.dir, "sampler_weights");
  const names = await readdir(dir).catch(() => [] as string[]);
  const lastFresh = run.sessions.findLastIndex((s) => s.start !== "resume");
  const best = new Map<number, { session: number; file: string }>();
  for (const name of names) {
    const match = SNAPSHOT_FILE.exec(name);
    if (!match) continue;
    const step = match[1] === undefined ? 0 : Number(match[1]);
    const session = match[2] === undefined ? 0 : Number(match[2]);
    if (session < Math.max(0, lastFresh)) continue;
    const known = best.get(step);
    if (!known || known.session < session) best.set(step, { session, file: join(dir, name) });
  }
  return [...best.entries()].map(([step, { file }]) => ({ step, file })).sort((a, b) => a.step - b.step);
}

/** The checkpoints and (local engine) sampler snapshots of `run`. */
export async function readRunWeights(run: RunFolder): Promise<RunWeights> {
  const backend = configValue(run.config, "service.train_service.backend");
  return {
    checkpoints: await readCheckpoints(run),
    snapshots: backend === "local" ? await readSnapshots(run) : [],
  };
}
