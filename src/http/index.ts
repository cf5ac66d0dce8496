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
export { DEFAULT_BACKOFF, backoffDelayMs, retryAfterMs, type BackoffOptions } from "./backoff.js";
export { Redactor } from "./redact.js";
export { type EndpointOptions } from "./endpoint.js";
export { type ErrorHints } from "./errors.js";
