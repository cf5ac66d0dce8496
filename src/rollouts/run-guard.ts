/**
 * Process-level guards of a run: uncaught exceptions and unhandled rejections raised by user code
 * while a run is going, and a run that can no longer progress because the process has nothing
 * left to do (a promise that never settles).
 *
 * Attribution uses `AsyncLocalStorage`: each rollout attempt runs inside {@link inRollout}, and a
 * whole run inside {@link runGuarded}, so a timer callback or promise continuation started by a
 * rollout still knows which rollout (and run) it belongs to when it throws. An error with no
 * context (a `queueMicrotask` callback) goes to every run in progress.
 *
 * While at least one run is guarded, the process has `uncaughtException`, `unhandledRejection`
 * and `beforeExit` listeners; they are removed when the last run ends.
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** Code of a rollout attempt, as the guard sees it. */
export interface GuardedRollout {
  /** Takes an uncaught error raised by the rollout's code; false when the rollout cannot take it. */
  uncaught(error: unknown): boolean;
}

/** A run, as the guard sees it. */
export interface GuardedRun {
  /**
   * The process has nothing left to do while the run waits: end whatever hangs (or stop the
   * run). Called on every `beforeExit` while the run is going.
   */
  stalled(): void;
  /** An uncaught error of the run's code that no rollout took. */
  crashed(error: unknown): void;
}

const rollouts = new AsyncLocalStorage<GuardedRollout>();
const runs = new AsyncLocalStorage<GuardedRun>();
const active = new Set<GuardedRun>();

function onUncaught(error: unknown): void {
  if (rollouts.getStore()?.uncaught(error)) return;
  const run = runs.getStore();
  const targets = run && active.has(run) ? [run] : [...active];
  for (const target of targets) target.crashed(error);
}

function onBeforeExit(): void {
  for (const run of [...active]) run.stalled();
}

/** Runs `body` as run `run`: process-level problems of its code go to `run` until it settles. */
export async function runGuarded<T>(run: GuardedRun, body: () => Promise<T>): Promise<T> {
  if (active.size === 0) {
    process.on("uncaughtException", onUncaught);
    process.on("unhandledRejection", onUncaught);
    process.on("beforeExit", onBeforeExit);
  }
  active.add(run);
  try {
    return await runs.run(run, body);
  } finally {
    active.delete(run);
    if (active.size === 0) {
      process.removeListener("uncaughtException", onUncaught);
      process.removeListener("unhandledRejection", onUncaught);
      process.removeListener("beforeExit", onBeforeExit);
    }
  }
}

/** Calls `fn` as code of `rollout`: uncaught errors it (or what it starts) raises go to `rollout` first. */
export function inRollout<A extends unknown[], R>(rollout: GuardedRollout, fn: (...args: A) => R, ...args: A): R {
  // eslint-disable-next-line no-restricted-syntax -- forwards the caller's own few arguments
  return rollouts.run(rollout, fn, ...args);
}
