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
 * A trainer cannot turn the trajectories it was given into a training step: a loss input is
 * missing (an advantage for an RL loss), values are malformed, or a helper service failed.
 */
export class TrainerError extends NexrlError {}

/** The recipe asks for a backend or service this build of nexrl cannot reach yet. */
export class BackendNotAvailableError extends NexrlError {}

/**
 * A run cannot start or resume: the recipe and the model disagree (a sequence longer than the
 * model's context), or a checkpoint is missing, unreadable or from another run. Names the
 * recipe key or file involved.
 */
export class RunSetupError extends NexrlError {}
