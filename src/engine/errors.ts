/**
 * Errors of the local engine. Each says what was wrong and how to fix it.
 *
 * @module
 */
import { NexrlError } from "../types/errors.js";

/** A model configuration or preset name the engine cannot build. */
export class ModelConfigError extends NexrlError {}

/** A sequence longer than the model's context window. */
export class ContextLengthError extends NexrlError {
  /**
   * @param what which sequence ("datum 3", "prompt", …).
   * @param length its number of positions.
   * @param contextLength the model's context length.
   * @param hint how to fix it.
   */
  constructor(
    readonly what: string,
    readonly length: number,
    readonly contextLength: number,
    hint: string,
  ) {
    super(`${what} has ${length} tokens but the model's context length is ${contextLength}; ${hint}`);
  }
}

/** A token id outside the model's vocabulary (or not an integer). */
export class TokenIdError extends NexrlError {}

/** Sampling parameters out of range. */
export class SamplingParamsError extends NexrlError {}

/** Why a state or snapshot file was refused. */
export type StateFileProblem =
  | "not_found"
  | "not_a_state_file"
  | "unsupported_version"
  | "truncated"
  | "corrupt"
  | "config_mismatch"
  | "missing_optimizer";

/** A state or sampler-weights file that cannot be loaded. */
export class StateFileError extends NexrlError {
  /**
   * @param path the file.
   * @param problem the kind of problem.
   * @param detail what exactly was found and what to do.
   */
  constructor(
    readonly path: string,
    readonly problem: StateFileProblem,
    detail: string,
  ) {
    super(`cannot load ${path}: ${detail}`);
  }
}

/** A checkpoint or snapshot name that is not a plain file-name stem. */
export class CheckpointNameError extends NexrlError {}

/** A sampler snapshot name that is already taken (snapshots are immutable). */
export class SnapshotExistsError extends NexrlError {}

/** A gradient that is not finite, so the optimizer step was refused. */
export class NonFiniteGradientError extends NexrlError {}

/** An engine option (threads, kernels) that cannot be honoured. */
export class EngineOptionError extends NexrlError {}

/** A call on an engine or sampler after its `close()`. */
export class EngineClosedError extends NexrlError {}

/** A failure inside one of the engine's worker threads, re-thrown on the calling thread. */
export class EngineThreadError extends NexrlError {
  /**
   * @param message what failed in the worker.
   * @param workerStack the stack trace inside the worker, when there was one.
   */
  constructor(
    message: string,
    readonly workerStack?: string,
  ) {
    super(message);
  }
}
