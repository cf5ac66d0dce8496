/**
 * {@link HttpTransport}: JSON over HTTP on a shared keep-alive connection pool, with the API key
 * header, per-call timeouts and `AbortSignal`s, typed errors, idempotency keys, and retries with
 * jittered exponential backoff that honour `retry-after`.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_BACKOFF, backoffDelayMs, retryAfterMs, sleep, type BackoffOptions } from "./backoff.js";
import { statusError, type ErrorHints } from "./errors.js";
import {
  APIConnectionError,
  APIError,
  type APIErrorContext,
  APITimeoutError,
  APIUserAbortError,
  NexrlError,
} from "../errors.js";
import { acquirePool, type PoolLease } from "./pools.js";
import { Redactor } from "./redact.js";
import { Exchange, TIMED_OUT, type Answer } from "./exchange.js";

/**
 * Which failures a request may be sent again after:
 * - `all`: every retryable failure (retryable statuses, broken connections, timeouts); for
 *   idempotent requests and for requests the service deduplicates (idempotency key, `seq_id`);
 * - `unsent`: only a connection that was never made, so the service cannot have seen it;
 * - `none`: never.
 */
export type RetryMode = "all" | "unsent" | "none";

/** Options of {@link HttpTransport}. */
export interface HttpTransportOptions {
  /** Base URL; request paths are appended to it (it may carry a path prefix). */
  baseUrl: string;
  /** API key sent in `apiKeyHeader`; redacted from every error and log line. */
  apiKey?: string;
  /** Header carrying the API key, e.g. `X-API-Key` (Tinker) or `X-WEAVER-API-KEY` (Weaver). */
  apiKeyHeader?: string;
  /** Scheme written before the key, e.g. `Bearer` for `Authorization: Bearer <key>` (default: the key alone). */
  apiKeyScheme?: string;
  /** Where the key comes from, named in authentication errors (e.g. `TINKER_API_KEY`). */
  apiKeySource?: string;
  /** The service's own fix-it hints for error statuses and timeouts, replacing the defaults. */
  hints?: ErrorHints;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** Default per-call timeout in milliseconds (60 000). */
  timeoutMs?: number;
  /** Most retries of one call after its first attempt (10). */
  maxRetries?: number;
  /**
   * Most connections open at once to the base URL's origin (default 1000, as in the OpenAI and
   * Tinker Python SDKs). Each request in flight needs a connection of its own (HTTP/1.1): calls
   * beyond the limit wait for a free one, and that wait counts toward their timeout. Transports
   * to the same origin with the same limit share their connections.
   */
  connections?: number;
  /** Backoff between retries (0.5 s doubling to 10 s, jittered). */
  backoff?: Partial<BackoffOptions>;
  /** Receives one line per retry; API keys are already redacted. */
  log?: (line: string) => void;
}

/** HTTP methods the transport sends. */
export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** One call of {@link HttpTransport.request}. */
export interface HttpRequest {
  /** HTTP method. */
  method: HttpMethod;
  /** Path below the base URL, e.g. `/api/v1/healthz`. */
  path: string;
  /** JSON body, serialised with `JSON.stringify`. */
  body?: unknown;
  /** A JSON body already serialised, sent as it is (instead of `body`). */
  encodedBody?: string | Uint8Array;
  /** Extra headers of this call. */
  headers?: Record<string, string>;
  /** Timeout of each attempt in milliseconds (default: the transport's). */
  timeoutMs?: number;
  /** Aborts the call, retries and waits included. */
  signal?: AbortSignal;
  /** Which failures to retry; default `all` for GET and `unsent` otherwise. */
  retry?: RetryMode;
  /**
   * Sends `X-Idempotency-Key`, the same on every attempt: `true` makes a fresh key for this call,
   * a string is used as it is.
   */
  idempotencyKey?: boolean | string;
}

/** A successful (2xx) response. */
export interface HttpResponse<T = unknown> {
  /** HTTP status. */
  status: number;
  /** Response headers, lower-cased names. */
  headers: Record<string, string>;
  /** Parsed JSON body (undefined when empty), the text when it was not JSON, or the bytes of a binary (protobuf) body. */
  body: T;
  /** The service's request id, when it gave one. */
  requestId?: string;
}

/** The bytes `request` sends: `encodedBody`, else `body` as JSON, else none. */
export function requestBodyText(request: Pick<HttpRequest, "body" | "encodedBody">): string | Uint8Array | undefined {
  if (request.encodedBody !== undefined) return request.encodedBody;
  return request.body === undefined ? undefined : JSON.stringify(request.body);
}

/** Connections per origin when {@link HttpTransportOptions.connections} is not given. */
const DEFAULT_CONNECTIONS = 1000;

/** What an exchange is aborted with when its caller's signal aborts or the transport is closed. */
const ABORTED = new NexrlError("the exchange was aborted");

/** One call of {@link HttpTransport.request}, resolved against the transport's defaults. */
interface Call {
  readonly method: HttpMethod;
  readonly path: string;
  readonly headers: Record<string, string>;
  /** The body serialised and encoded once: every attempt sends the same bytes. */
  readonly body: Uint8Array | undefined;
  readonly signal: AbortSignal | undefined;
  readonly timeoutMs: number;
  readonly mode: RetryMode;
}

/**
 * Retries of a connection never made to an origin that has not answered yet, when the cause
 * will not pass by itself: refused on a loopback address (no server there, or not yet: a server
 * started a moment earlier gets a few seconds) or a host name that does not resolve. Once the
 * origin has answered, such failures mean a restart and get the full retry budget.
 */
const FIRST_CONTACT_RETRIES = 3;

/** True for `localhost` and loopback IP addresses (a URL writes IPv6 hosts in brackets). */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Error codes of connections that were never made: the service cannot have seen the request. */
const NOT_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function errorCode(error: unknown): string | undefined {
  const own = (error as { code?: unknown } | undefined)?.code;
  if (typeof own === "string") return own;
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return typeof cause === "string" ? cause : undefined;
}

/** Response headers with lower-cased names, repeated headers joined. */
function flatHeaders(headers: Answer["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/** Whether a `content-type` names a binary body (protobuf, octet-stream), which is kept as bytes. */
function isBinaryContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && /application\/(x-protobuf|octet-stream)/.test(contentType);
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (text === "") return undefined;
  if (contentType?.includes("json")) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

function bodyRequestId(body: unknown): string | undefined {
  const id = body && typeof body === "object" ? (body as Record<string, unknown>).request_id : undefined;
  return typeof id === "string" ? id : undefined;
}

/**
 * JSON over HTTP to one service. Connections come from a keep-alive connection pool per origin
 * (at most {@link HttpTransportOptions.connections} of them), shared with other transports to
 * the same origin.
 *
 * @example
 * ```ts
 * const http = new HttpTransport({ baseUrl: "http://127.0.0.1:8000", apiKey, apiKeyHeader: "X-API-Key" });
 * const { body } = await http.request({ method: "POST", path: "/api/v1/create_session", body: {...}, retry: "all", idempotencyKey: true });
 * await http.close();
 * ```
 */
export class HttpTransport {
  private readonly origin: string;
  private readonly prefix: string;
  private readonly lease: PoolLease;
  private readonly closing = new AbortController();
  /** The exchanges in flight, which `close()` aborts. */
  private readonly inFlight = new Set<Exchange>();
  /** Callers' signals, and the exchanges in flight each would abort. */
  private readonly watched = new WeakMap<AbortSignal, Set<Exchange>>();
  private readonly redactor: Redactor;
  private readonly baseHeaders: Record<string, string>;
  /** `baseHeaders` and the JSON content type: the headers of most calls, built once. */
  private readonly jsonHeaders: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoff: BackoffOptions;
  private readonly apiKeySource: string;
  private readonly hints: ErrorHints;
  private readonly log: ((line: string) => void) | undefined;
  /** Whether the base URL's host is this machine's loopback. */
  private readonly loopback: boolean;

  /** @param options where to send requests, the key, timeouts, retries and the connection limit. */
  constructor(options: HttpTransportOptions) {
    const base = new URL(options.baseUrl);
    this.origin = base.origin;
    this.loopback = isLoopbackHost(base.hostname);
    this.prefix = base.pathname.replace(/\/+$/, "");
    this.lease = acquirePool(this.origin, options.connections ?? DEFAULT_CONNECTIONS);
    const keyHeader = options.apiKeyHeader ?? "X-API-Key";
    this.redactor = new Redactor([options.apiKey], [keyHeader]);
    this.baseHeaders = {
      "user-agent": "nexrl",
      accept: "application/json",
      ...options.headers,
      ...(options.apiKey !== undefined &&
        options.apiKey !== "" && {
          [keyHeader]: options.apiKeyScheme ? `${options.apiKeyScheme} ${options.apiKey}` : options.apiKey,
        }),
    };
    this.jsonHeaders = { ...this.baseHeaders, "content-type": "application/json" };
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 10;
    this.backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.apiKeySource = options.apiKeySource ?? "the API key";
    this.hints = options.hints ?? {};
    this.log = options.log;
  }

  /** The base URL requests go to. */
  get baseUrl(): string {
    return this.origin + this.prefix;
  }

  /** `text` with the API key replaced by `***`; use it on anything derived from a response. */
  redact(text: string): string {
    return this.redactor.text(text);
  }

  /** Redacts `secret` from errors and logs too, like the API key (for credentials obtained with it, such as a JWT). */
  addSecret(secret: string): void {
    this.redactor.add(secret);
  }

  /**
   * Sends one call, retrying as `request.retry` allows, and returns the 2xx response.
   * @throws {@link APIError} (a subclass per status) for an error status,
   * {@link APIConnectionError} when no response arrived, {@link APITimeoutError} when the timeout
   * passed, {@link APIUserAbortError} when the signal aborted or the transport was closed.
   */
  request<T = unknown>(request: HttpRequest): Promise<HttpResponse<T>> {
    let call: Call;
    try {
      call = this.call(request);
    } catch (error) {
      // A body JSON.stringify refuses (a BigInt, a cycle) fails the call like any other failure.
      return Promise.reject(error);
    }
    return this.attempt(call, 0) as Promise<HttpResponse<T>>;
  }

  /** Aborts calls in flight and gives the connection pool back. */
  async close(): Promise<void> {
    this.closing.abort(new Error("the client was closed"));
    for (const exchange of this.inFlight) exchange.abort(ABORTED);
    await this.lease.release();
  }

  /** `request` resolved against the transport's defaults, its body serialised. */
  private call(request: HttpRequest): Call {
    const key = request.idempotencyKey === true ? `nexrl-retry-${randomUUID()}` : request.idempotencyKey || undefined;
    const text = requestBodyText(request);
    // Encoded once, as undici would on every attempt; the bytes of calls in flight then live
    // outside the JavaScript heap (see bench/README.md).
    const body = typeof text === "string" ? Buffer.from(text) : text;
    const common = body === undefined ? this.baseHeaders : this.jsonHeaders;
    return {
      method: request.method,
      path: request.path,
      headers:
        key === undefined && request.headers === undefined
          ? common
          : { ...common, ...(key !== undefined && { "x-idempotency-key": key }), ...request.headers },
      body,
      signal: request.signal,
      timeoutMs: request.timeoutMs ?? this.timeoutMs,
      mode: request.retry ?? (request.method === "GET" ? "all" : "unsent"),
    };
  }

  /**
   * What follows attempt `retries` (0 for the first) of `call` failing with `failure`: the next
   * attempt after a backoff, when the failure, the retry mode and the budget allow one.
   */
  private async retried(call: Call, failure: unknown, retries: number): Promise<HttpResponse<unknown>> {
    const budget = this.retryBudget(failure);
    if (!(failure instanceof APIError) || retries >= budget || !this.mayRetry(failure, call.mode)) throw failure;
    const wait = failure.retryAfterMs ?? backoffDelayMs(retries + 1, this.backoff);
    this.log?.(
      this.redact(
        `nexrl http: ${call.method} ${failure.url} failed (${this.describe(failure)}); retry ${retries + 1}/${budget} in ${Math.round(wait)} ms`,
      ),
    );
    await this.wait(wait, call);
    return this.attempt(call, retries + 1);
  }

  /**
   * Attempt `retries` (0 for the first) of `call`, given up on when its timeout passes, the
   * caller's signal aborts or the transport is closed; its failure leads to the next attempt as
   * {@link HttpTransport.retried} allows.
   */
  private attempt(call: Call, retries: number): Promise<HttpResponse<unknown>> {
    if (call.signal?.aborted || this.closing.signal.aborted) return Promise.reject(this.aborted(call));
    const exchange = new Exchange(
      this.lease.shared.pool,
      { path: this.prefix + call.path, method: call.method, headers: call.headers, body: call.body ?? null },
      call.timeoutMs,
    );
    const watchers = call.signal && this.watchersOf(call.signal);
    this.inFlight.add(exchange);
    watchers?.add(exchange);
    // A promise chain, not an async function: see bench/README.md on frames held per call in flight.
    return exchange.answer.then(
      (answer) => {
        this.inFlight.delete(exchange);
        watchers?.delete(exchange);
        this.lease.shared.reached = true;
        try {
          return this.response(answer, call);
        } catch (failure) {
          return this.retried(call, failure, retries);
        }
      },
      (error: unknown) => {
        this.inFlight.delete(exchange);
        watchers?.delete(exchange);
        return this.retried(call, this.failure(error, call), retries);
      },
    );
  }

  /** The error of an exchange that got no answer: it timed out, was aborted, or its connection failed. */
  private failure(error: unknown, call: Call): APIError {
    if (error === TIMED_OUT) return APITimeoutError.fromTimeout(this.context(call), call.timeoutMs, this.hints.timeout);
    if (error === ABORTED) return this.aborted(call);
    const code = errorCode(error);
    return APIConnectionError.fromCause(this.context(call), !(code !== undefined && NOT_CONNECTED.has(code)), error);
  }

  /**
   * The exchanges in flight `signal` aborts. A signal gets one listener, kept until it aborts,
   * however many calls it covers: a run's stop signal may cover a thousand, and Node warns past
   * ten listeners on one signal.
   */
  private watchersOf(signal: AbortSignal): Set<Exchange> {
    let watchers = this.watched.get(signal);
    if (!watchers) {
      const created = new Set<Exchange>();
      signal.addEventListener("abort", () => created.forEach((exchange) => exchange.abort(ABORTED)), { once: true });
      this.watched.set(signal, created);
      watchers = created;
    }
    return watchers;
  }

  /** The error of a call given up on by its caller's signal or by `close()`. */
  private aborted(call: Call): APIUserAbortError {
    const source = call.signal?.aborted ? call.signal : this.closing.signal;
    const reason: unknown = source.reason;
    return APIUserAbortError.fromReason(
      this.context(call),
      this.redact(reason instanceof Error ? reason.message : String(reason ?? "aborted")),
    );
  }

  /**
   * The response of a complete answer: its body parsed as JSON (or text), or its bytes for a
   * binary content type.
   * @throws {@link APIError} for a status outside 2xx.
   */
  private response(answer: Answer, call: Call): HttpResponse<unknown> {
    const { status } = answer;
    const headers = flatHeaders(answer.headers);
    const binary = isBinaryContentType(headers["content-type"]);
    const parsed = binary ? answer.body : parseBody(answer.body.toString("utf8"), headers["content-type"]);
    const requestId = headers["x-request-id"] ?? bodyRequestId(parsed);
    if (status >= 200 && status < 300)
      return { status, headers, body: parsed, ...(requestId !== undefined && { requestId }) };
    const retryAfter = retryAfterMs(headers);
    throw statusError(
      {
        ...this.context(call),
        status,
        body: binary ? `(${answer.body.byteLength} bytes of ${headers["content-type"]})` : this.redactor.value(parsed),
        headers,
        ...(requestId !== undefined && { requestId }),
        ...(retryAfter !== undefined && { retryAfterMs: retryAfter }),
      },
      this.apiKeySource,
      this.hints,
    );
  }

  /** Retries `failure` may get: the transport's budget, or a few for a first contact that cannot succeed soon. */
  private retryBudget(failure: unknown): number {
    if (!(failure instanceof APIConnectionError) || failure.connected || this.lease.shared.reached)
      return this.maxRetries;
    const code = errorCode(failure.cause);
    const hopeless = code === "ENOTFOUND" || (code === "ECONNREFUSED" && this.loopback);
    return hopeless ? Math.min(FIRST_CONTACT_RETRIES, this.maxRetries) : this.maxRetries;
  }

  private mayRetry(error: APIError, mode: RetryMode): boolean {
    if (mode === "none") return false;
    if (mode === "unsent") return error instanceof APIConnectionError && !error.connected;
    return error.isRetryable;
  }

  private describe(error: APIError): string {
    if (error.status !== undefined)
      return `HTTP ${error.status}${error.requestId ? `, request id ${error.requestId}` : ""}`;
    return error instanceof APITimeoutError ? "timeout" : "connection error";
  }

  /** What errors say about a call. */
  private context(call: Call): APIErrorContext {
    return { method: call.method, url: this.baseUrl + call.path, requestHeaders: this.redactor.headers(call.headers) };
  }

  /** Waits `ms` before a retry; the caller's signal and `close()` cut the wait short. */
  private async wait(ms: number, call: Call): Promise<void> {
    const signal = call.signal ? AbortSignal.any([call.signal, this.closing.signal]) : this.closing.signal;
    try {
      await sleep(ms, signal);
    } catch {
      throw this.aborted(call);
    }
  }
}
