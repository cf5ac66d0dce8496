/**
 * Errors of the Weaver backend.
 *
 * @module
 */
import { NexrlError } from "../../../types/errors.js";

/** A Weaver operation ended in state `error`. */
export class OperationFailedError extends NexrlError {
  /**
   * @param what the request, e.g. `forward_backward (seq_id 3)`.
   * @param code the service's `error_code` (or `error`).
   * @param serviceMessage the service's `error_message` (API key redacted).
   * @param details the service's `error_details`, when given.
   */
  constructor(
    what: string,
    readonly code: string,
    readonly serviceMessage: string,
    readonly details: unknown,
  ) {
    super(
      `${what} failed on the Weaver service (${code}): ${serviceMessage}; check the request's inputs, or retry if the service was at fault`,
    );
  }
}

/** Pause or continue asked of a sampler that cannot pause (LoRA models share their inference engine). */
export class PauseNotSupportedError extends NexrlError {}

/** A Weaver answer without the documented fields. */
export class WeaverResponseError extends NexrlError {}
