/**
 * Errors of the Tinker backend.
 *
 * @module
 */
import { NexrlError } from "../../../types/errors.js";

/** Who a Tinker request failure is attributed to (`RequestErrorCategory`). */
export type RequestErrorCategory = "user" | "server" | "unknown";

/**
 * A Tinker operation failed on the service (`retrieve_future` answered `{error, category}`).
 * `category` `user` means the request was wrong (fix the inputs); `server` and `unknown` mean
 * the service failed.
 */
export class RequestFailedError extends NexrlError {
  /**
   * @param what the request, e.g. `forward_backward (seq_id 3)`.
   * @param serviceMessage the service's `error` text (API key redacted).
   * @param category the service's `category`.
   */
  constructor(
    what: string,
    readonly serviceMessage: string,
    readonly category: RequestErrorCategory,
  ) {
    super(
      `${what} failed on the Tinker service (${category} error): ${serviceMessage}${
        category === "user"
          ? "; fix the request (inputs, names, paths) and submit it again"
          : "; retry later, or report it if it persists"
      }`,
    );
  }
}

/** Asked Tinker for something it does not offer (full fine-tuning). */
export class UnsupportedTrainingModeError extends NexrlError {}
