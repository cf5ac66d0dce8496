/**
 * The errors the training pipeline throws on purpose. Each says what was wrong and what to do.
 * @module
 */
import { NexrlError } from "../types/errors.js";

/**
 * A data file could not be used: unknown format, unreadable or malformed content, a row without
 * the prompt key, or no task left after filtering.
 */
export class DataLoaderError extends NexrlError {}

/** Where a failed rollout came from, for {@link RolloutError}. */
export interface RolloutOrigin {
  /** Row index of the task in its dataset. */
  index: number;
  /** Group id shared by the copies of the task. */
  groupId: string;
  /** Index of the copy within its group. */
  runId: number;
  /** True for a validation rollout. */
  isVal: boolean;
}

/**
 * A rollout failed and the failure policy stops the run (`stop_on_error` once retries are used
 * up). Names the task, the attempts made and the worker's error as `cause`.
 */
export class RolloutError extends NexrlError {
  /** The rollout that failed. */
  readonly origin: RolloutOrigin;
  /** Attempts made, the first included. */
  readonly attempts: number;

  /**
   * @param origin the rollout that failed.
   * @param attempts attempts made.
   * @param message what happened and what to do.
   * @param cause the last attempt's error.
   */
  constructor(origin: RolloutOrigin, attempts: number, message: string, cause: unknown) {
    super(message, { cause });
    this.origin = origin;
    this.attempts = attempts;
  }
}

/** A rollout took longer than `rollout_worker.rollout_timeout_seconds`. */
export class RolloutTimeoutError extends NexrlError {}

/**
 * A rollout can never finish: the process had nothing left to do (no timer, socket or other
 * work pending) while the rollout's promise was still unsettled, so it was ended. Counted as a
 * timeout (`rollout/timed_out`) and handled by the failure policy like one.
 */
export class RolloutHungError extends RolloutTimeoutError {}

/**
 * An exception nobody caught, or a promise rejection nobody handled, was raised by user code
 * during a run: inside a rollout it fails that rollout (the failure policy applies); anywhere
 * else it stops the run. The original error is the `cause`.
 */
export class UncaughtUserError extends NexrlError {}

/**
 * The run cannot make progress: the process had nothing left to do while the training loop was
 * still waiting (a promise in user code, such as a trainer, that never settles).
 */
export class RunStalledError extends NexrlError {}

/**
 * A training step had no successful rollout: every rollout of its batch failed and the
 * `continue` policy skipped them, so there is nothing to train on. The run stops rather than
 * step without data; `failures.jsonl` in the run folder lists every failure.
 */
export class NoSuccessfulRolloutError extends NexrlError {}

/**
 * A trainer cannot turn the trajectories it was given into a training step: a loss input is
 * missing (an advantage for an RL loss), values are malformed, or a helper service failed.
 */
export class TrainerError extends NexrlError {}

/** The recipe asks for a backend or service this build of nexrl cannot reach yet. */
export class BackendNotAvailableError extends NexrlError {}

/**
 * The run's output folder cannot be used: it cannot be created or written (a read-only or
 * immutable folder, no permission, a path under a file), or another live run holds it
 * ({@link RunFolderLockedError}). Names the folder and the cause.
 */
export class OutputDirError extends NexrlError {}

/** What a run folder's lock file says about the run holding it. */
export interface RunLockHolder {
  /** Process id. */
  pid: number;
  /** Host name of the machine it runs on. */
  host: string;
  /** When it took the lock (ISO 8601). */
  startedAt: string;
  /** Its command line. */
  command: string;
}

/** Another run holds the output folder: two writers would interleave metrics and overwrite checkpoints. */
export class RunFolderLockedError extends OutputDirError {
  /** The process holding the folder. */
  readonly holder: RunLockHolder;

  /**
   * @param message what happened and what to do.
   * @param holder the process holding the folder.
   */
  constructor(message: string, holder: RunLockHolder) {
    super(message);
    this.holder = holder;
  }
}

/**
 * A run cannot start or resume: the recipe and the model disagree (a sequence longer than the
 * model's context), or a checkpoint is missing, unreadable or from another run. Names the
 * recipe key or file involved.
 */
export class RunSetupError extends NexrlError {}
