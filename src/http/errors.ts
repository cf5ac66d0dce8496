/**
 * Typed errors of the HTTP transport. Every error names the request (method and URL), carries
 * the HTTP status and the service's request id when there was a response, and says whether a
 * retry may succeed (`isRetryable`).
 *
 * @module
 */
import { NexrlError } from "../types/errors.js";

/** What every transport error knows about the failed request. */
export interface HttpErrorContext {
  /** HTTP method. */
  method: string;
  /** Full URL (API keys never appear in it). */
  url: string;
  /** The request headers as sent, with the API key header's value replaced by `***`. */
  requestHeaders?: Record<string, string>;
}

/** Base class of every error of the HTTP transport. */
export class HttpError extends NexrlError {
  /** HTTP method of the failed request. */
  readonly method: string;
  /** URL of the failed request. */
  readonly url: string;
  /** Request headers as sent, API key redacted. */
  readonly requestHeaders: Record<string, string>;
  /** HTTP status of the response; undefined when no response arrived. */
  readonly status: number | undefined = undefined;
  /** The service's request id (`x-request-id` header or `request_id` body field), when it gave one. */
  readonly requestId: string | undefined = undefined;
  /** Whether sending the request again may succeed. */
  readonly isRetryable: boolean = false;

  /**
   * @param message what went wrong and what to do.
   * @param context the request.
   */
  constructor(message: string, context: HttpErrorContext, options?: { cause?: unknown }) {
    super(message, options);
    this.method = context.method;
    this.url = context.url;
    this.requestHeaders = context.requestHeaders ?? {};
  }
}

/** What an {@link ApiStatusError} knows about the response. */
export interface ApiStatusDetails extends HttpErrorContext {
  /** HTTP status. */
  status: number;
  /** Parsed JSON body, or the text when it was not JSON (API key redacted). */
  body: unknown;
  /** Response headers, lower-cased names. */
  headers: Record<string, string>;
  /** The service's request id, when it gave one. */
  requestId?: string;
  /** Delay the service asked for (`retry-after-ms` / `retry-after`), in milliseconds. */
  retryAfterMs?: number;
  /** What to do about it, appended to the message. */
  hint: string;
}

/** Reads the service's own explanation out of an error body (`message`, `detail`, `error`, or the text). */
function serviceMessage(body: unknown): string {
  if (typeof body === "string") return body.trim().slice(0, 500);
  if (body && typeof body === "object") {
    const record = body as Record<string, unknown>;
    for (const key of ["message", "detail", "error"]) {
      const value = record[key];
      if (typeof value === "string" && value !== "") return value;
      if (value !== undefined && value !== null) return JSON.stringify(value).slice(0, 500);
    }
    return JSON.stringify(body).slice(0, 500);
  }
  return "";
}

/** True when the status alone says a retry may succeed: 408, 429 and 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * The service answered with an error status. Subclasses name the common statuses; any other
 * status is an `ApiStatusError` itself. `isRetryable` follows an `x-should-retry` header or a
 * boolean `retryable` body field when the service sends one, and otherwise the status
 * (408, 429 and 5xx are retryable).
 */
export class ApiStatusError extends HttpError {
  override readonly status: number;
  override readonly requestId: string | undefined;
  override readonly isRetryable: boolean;
  /** Parsed JSON body, or the text (API key redacted). */
  readonly body: unknown;
  /** Response headers, lower-cased names. */
  readonly headers: Record<string, string>;
  /** Delay the service asked for before a retry, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  /** @param details the response and a hint on what to do. */
  constructor(details: ApiStatusDetails) {
    const said = serviceMessage(details.body);
    const id = details.requestId ? ` (request id ${details.requestId})` : "";
    super(
      `${details.method} ${details.url} failed with HTTP ${details.status}${said ? `: ${said}` : ""}${id}. ${details.hint}`,
      details,
    );
    this.status = details.status;
    this.requestId = details.requestId;
    this.body = details.body;
    this.headers = details.headers;
    this.retryAfterMs = details.retryAfterMs;
    const shouldRetry = details.headers["x-should-retry"];
    const bodyRetryable =
      details.body && typeof details.body === "object"
        ? (details.body as Record<string, unknown>).retryable
        : undefined;
    this.isRetryable =
      shouldRetry === "true" || shouldRetry === "false"
        ? shouldRetry === "true"
        : typeof bodyRetryable === "boolean"
          ? bodyRetryable
          : isRetryableStatus(details.status);
  }
}

/** HTTP 400: the service rejected the request. */
export class BadRequestError extends ApiStatusError {}
/** HTTP 401: the API key is missing or wrong. */
export class AuthenticationError extends ApiStatusError {}
/** HTTP 402: the account may not run more work until its billing is sorted out. */
export class PaymentRequiredError extends ApiStatusError {}
/** HTTP 403: the API key may not do this. */
export class PermissionDeniedError extends ApiStatusError {}
/** HTTP 404: no such resource (wrong id or path, or it expired). */
export class NotFoundError extends ApiStatusError {}
/** HTTP 409: the resource exists already or is in a conflicting state. */
export class ConflictError extends ApiStatusError {}
/** HTTP 422: the body does not match the service's schema. */
export class UnprocessableEntityError extends ApiStatusError {}
/** HTTP 429: rate limited; retry after `retryAfterMs`. */
export class RateLimitError extends ApiStatusError {}
/** HTTP 5xx: the service failed. */
export class InternalServerError extends ApiStatusError {}

/** Why a connection could not be made, in words, for the causes that have a plain explanation. */
function connectFailure(url: string, cause: unknown): string | undefined {
  const error = cause as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const code = error?.code ?? error?.cause?.code;
  const { host, hostname } = new URL(url);
  if (code === "ECONNREFUSED") return `connection refused: nothing listens on ${host}`;
  if (code === "ENOTFOUND") return `the host name ${hostname} does not resolve`;
  return undefined;
}

/**
 * No response arrived: the connection could not be made, or it broke before the answer.
 * `connected` tells whether the request may have reached the service.
 */
export class ApiConnectionError extends HttpError {
  override readonly isRetryable = true;
  /**
   * False when the connection was never made (refused, unresolvable host, connect timeout): the
   * service cannot have seen the request, so even a non-idempotent request may be sent again.
   */
  readonly connected: boolean;

  /**
   * @param context the request.
   * @param connected whether a connection was made before the failure.
   * @param cause the underlying socket error.
   */
  constructor(context: HttpErrorContext, connected: boolean, cause: unknown) {
    const what = cause instanceof Error ? cause.message : String(cause);
    super(
      connected
        ? `${context.method} ${context.url}: the connection broke before the service answered (${what}); the service may or may not have handled the request`
        : `${context.method} ${context.url}: could not connect (${connectFailure(context.url, cause) ?? what}); check the base URL and that the service is running`,
      context,
      { cause },
    );
    this.connected = connected;
  }
}

/** The service did not answer within the call's timeout; it may still handle the request. */
export class ApiTimeoutError extends HttpError {
  override readonly isRetryable = true;
  /** The timeout that passed, in milliseconds. */
  readonly timeoutMs: number;

  /**
   * @param context the request.
   * @param timeoutMs the timeout that passed.
   */
  constructor(context: HttpErrorContext, timeoutMs: number) {
    super(
      `${context.method} ${context.url} got no answer within ${timeoutMs} ms; raise the timeout (timeoutMs) if the service is slow`,
      context,
    );
    this.timeoutMs = timeoutMs;
  }
}

/** The caller aborted the request (its `AbortSignal`), or the client was closed. */
export class RequestAbortedError extends HttpError {
  /**
   * @param context the request.
   * @param reason why, as the signal's reason says.
   */
  constructor(context: HttpErrorContext, reason: string) {
    super(`${context.method} ${context.url} was aborted: ${reason}`, context);
  }
}

const STATUS_CLASSES: Record<number, typeof ApiStatusError> = {
  400: BadRequestError,
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  422: UnprocessableEntityError,
  429: RateLimitError,
};

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

/** Builds the typed error for an error status (BadRequest for 400, …, InternalServer for ≥ 500). */
export function statusError(details: Omit<ApiStatusDetails, "hint">, apiKeySource: string): ApiStatusError {
  const Class = STATUS_CLASSES[details.status] ?? (details.status >= 500 ? InternalServerError : ApiStatusError);
  return new Class({ ...details, hint: statusHint(details.status, apiKeySource) });
}
