/**
 * Errors of the OpenAI-compatible inference client. Each says what was wrong and how to fix it.
 *
 * @module
 */
import { ApiStatusError, ApiTimeoutError, type HttpError } from "../../../http/errors.js";
import { NexrlError } from "../../../types/errors.js";
import { networkReason } from "../network-reason.js";

/** What to do about an HTTP status from an OpenAI-compatible server. */
function statusHint(status: number): string {
  if (status === 401 || status === 403) return "check apiKey (or OPENAI_API_KEY)";
  if (status === 404)
    return "check baseURL (it usually ends in /v1) and the model name the server serves (GET /v1/models)";
  if (status === 400 || status === 422) return "the server refused the request's parameters";
  if (status === 429) return "the server is overloaded; lower the number of concurrent rollouts or raise maxRetries";
  return "the server failed; check its logs";
}

/** The server's explanation in an OpenAI-style error body (`{ error: { message } }`), else the body's text. */
function serverMessage(body: unknown): string {
  if (typeof body === "string") return body.trim().slice(0, 500);
  const error = body && typeof body === "object" ? (body as { error?: unknown }).error : undefined;
  const message = error && typeof error === "object" ? (error as { message?: unknown }).message : error;
  if (typeof message === "string") return message;
  return body === undefined ? "" : JSON.stringify(body).slice(0, 500);
}

/** An OpenAI-compatible request that failed: an HTTP error status, no connection or a timeout. */
export class InferenceRequestError extends NexrlError {
  /** HTTP status; undefined when no response arrived. */
  readonly status: number | undefined;
  /** The server's request id, when it gave one. */
  readonly requestId: string | undefined;
  /** Whether sending the request again may succeed (408, 429, 5xx, connection failures, timeouts). */
  readonly isRetryable: boolean;

  /**
   * @param request method and URL, e.g. `POST http://127.0.0.1:8000/v1/completions`.
   * @param error the transport's error, after its retries.
   */
  constructor(request: string, error: HttpError) {
    const status = error.status;
    const requestId = error.requestId;
    const what =
      error instanceof ApiStatusError
        ? `failed with HTTP ${error.status}${requestId ? ` (request id ${requestId})` : ""}: ${serverMessage(error.body)}; ${statusHint(error.status)}`
        : error instanceof ApiTimeoutError
          ? "timed out; raise timeoutMs or lower maxTokens"
          : `could not reach the server (${networkReason(error)}); check baseURL and that the server is running`;
    super(`${request} ${what}`, { cause: error });
    this.status = status;
    this.requestId = requestId;
    this.isRetryable = error.isRetryable;
  }
}

/** A server that did not report the token ids nexrl needs, and no permission to re-tokenise. */
export class TokenIdsUnavailableError extends NexrlError {}

/** A response that lacks what every OpenAI-compatible response has (a choice, its logprobs). */
export class InferenceResponseError extends NexrlError {}
