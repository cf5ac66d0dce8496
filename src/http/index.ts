/**
 * The one HTTP transport of nexrl's service clients (undici): API key header, JSON bodies,
 * typed errors, timeouts, `AbortSignal`s, idempotency keys and retries with backoff.
 *
 * @module
 */
export {
  HttpTransport,
  requestBodyText,
  type HttpMethod,
  type HttpRequest,
  type HttpResponse,
  type HttpTransportOptions,
  type RetryMode,
} from "./transport.js";
export {
  ApiConnectionError,
  ApiStatusError,
  ApiTimeoutError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  HttpError,
  InternalServerError,
  NotFoundError,
  PaymentRequiredError,
  PermissionDeniedError,
  RateLimitError,
  RequestAbortedError,
  UnprocessableEntityError,
  isRetryableStatus,
  type ApiStatusDetails,
  type HttpErrorContext,
} from "./errors.js";
export { DEFAULT_BACKOFF, backoffDelayMs, retryAfterMs, type BackoffOptions } from "./backoff.js";
export { Redactor } from "./redact.js";
export { MissingApiKeyError, type EndpointOptions } from "./endpoint.js";
export { SubmitOrderError } from "./submit-order.js";
