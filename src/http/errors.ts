import { APIError, type APIStatusDetails } from "../errors.js";
/**
 * The hints the HTTP transport appends to an error status's message, and the error it builds
 * for one. The error classes live in `src/errors.ts`.
 *
 * @module
 */

/** The hints appended to each status's message. */
function statusHint(status: number, apiKeySource: string): string {
  switch (status) {
    case 400:
      return "The service rejected the request; check the values sent.";
    case 401:
      return `The API key was rejected; check ${apiKeySource}.`;
    case 402:
      return "The service paused the account for billing; check the account's balance or plan, then retry.";
    case 403:
      return `The API key may not do this; check the project or organisation ${apiKeySource} belongs to.`;
    case 404:
      return "No such resource: check the base URL and the id or path (it may have expired or belong to another session).";
    case 409:
      return "The resource already exists or is busy; use a new name or retry later.";
    case 422:
      return "The request body does not match the service's schema; check the field names and types.";
    case 429:
      return "The service is rate limiting; reduce concurrency or retry later.";
    default:
      return status >= 500
        ? "The service failed; retry later, and report the request id if it persists."
        : "Unexpected status.";
  }
}

/** What a service's client adds to the transport's fix-it hints. */
export interface ErrorHints {
  /** Replaces the hint for these statuses (e.g. 404: check the model name the server serves). */
  status?: Partial<Record<number, string>>;
  /** Replaces the hint of a timeout (default: raise the timeout (timeoutMs) if the service is slow). */
  timeout?: string;
}

/**
 * Builds the typed error for an error status (BadRequest for 400, …, InternalServer for ≥ 500).
 * @param apiKeySource where the key comes from, named in 401 and 403 hints.
 * @param hints the service's own hints, replacing the defaults.
 */
export function statusError(
  details: Omit<APIStatusDetails, "hint">,
  apiKeySource: string,
  hints: ErrorHints = {},
): APIError {
  return APIError.fromStatus({
    ...details,
    hint: hints.status?.[details.status] ?? statusHint(details.status, apiKeySource),
  });
}
