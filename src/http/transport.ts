/**
 * {@link HttpTransport}: JSON over HTTP on a shared keep-alive undici pool, with the API key
 * header, per-call timeouts and `AbortSignal`s, typed errors, idempotency keys, and retries with
 * jittered exponential backoff that honour `retry-after`.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_BACKOFF, backoffDelayMs, retryAfterMs, sleep, type BackoffOptions } from "./backoff.js";
import { statusError, type ErrorHints } from "./errors.js";
import { acquirePool, type PoolLease } from "./pools.js";
import { Redactor } from "./redact.js";
import {
  dispatchText,
  type ResponseHeaders,
  type TextAnswer,
  type TextExchange,
  type TextReceiver,
} from "./text-dispatch.js";
import {
  APIConnectionError,
  APIError,
  type APIErrorContext,
  APITimeoutError,
  APIUserAbortError,
  NexrlError,
} from "../errors.js";

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

/**
 * Receives the outcome of {@link HttpTransport.send}: exactly one of the two is called, once. They
 * may be called from within undici's callbacks, so neither may throw.
 */
export interface HttpReceiver<T> {
  /** The 2xx response. */
  answered(response: HttpResponse<T>): void;
  /** Why the call failed, as {@link HttpTransport.request} would reject. */
  failed(error: unknown): void;
}

/**
 * One call of {@link HttpTransport.send} across its attempts, and its attempt in flight. It
 * receives its exchange's outcome itself: no promise or closure per attempt.
 */
class Call implements TextReceiver {
  /** The attempt in flight, and its timeout timer. */
  exchange: TextExchange | undefined = undefined;
  timer: NodeJS.Timeout | undefined = undefined;
  /** Retries made so far. */
  attempt = 0;
  /** Where it is in the transport's in-flight list, and in its signal's, while an attempt is in flight. */
  index = -1;
  signalIndex = -1;

  constructor(
    readonly owner: CallOwner,
    readonly method: HttpMethod,
    readonly path: string,
    readonly signal: AbortSignal | undefined,
    /** Timeout of each attempt in milliseconds. */
    readonly timeoutMs: number,
    readonly headers: Record<string, string>,
    /** The body serialised: a large body object is not kept alive while the call waits. */
    readonly body: string | Uint8Array | undefined,
    readonly mode: RetryMode,
    readonly receiver: HttpReceiver<unknown>,
  ) {}

  textAnswered(answer: TextAnswer): void {
    this.owner.settled(this, answer, undefined);
  }

  textFailed(error: Error): void {
    this.owner.settled(this, undefined, error);
  }
}

/** What a {@link Call} needs of its transport (private methods of it, made once per transport). */
interface CallOwner {
  /** The outcome of the attempt in flight: the answer, or the error it failed with. */
  settled(call: Call, answer: TextAnswer | undefined, error: Error | undefined): void;
  /** What errors say about the call. */
  context(call: Call): APIErrorContext;
  /** The service's hint for a timeout, when it has its own. */
  timeoutHint(): string | undefined;
}

/** Times out the attempt of `call` in flight (a shared function: no closure per attempt). */
function timeOut(call: Call): void {
  call.exchange!.abort(new APITimeoutError(call.owner.context(call), call.timeoutMs, call.owner.timeoutHint()));
}

/** What `close()` gives up on the attempts in flight with (one shared reason, turned into an {@link APIUserAbortError}). */
const CLOSED = new NexrlError("the client was closed");

/** The bytes `request` sends: `encodedBody`, else `body` as JSON, else none. */
export function requestBodyText(request: Pick<HttpRequest, "body" | "encodedBody">): string | Uint8Array | undefined {
  if (request.encodedBody !== undefined) return request.encodedBody;
  return request.body === undefined ? undefined : JSON.stringify(request.body);
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

function flatHeaders(headers: ResponseHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
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
 * JSON over HTTP to one service. Connections come from one keep-alive pool per origin, shared
 * with other transports to the same origin.
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
  /**
   * The attempts in flight, which `close()` aborts; each knows its index. An array with
   * swap-removal rather than a `Set`: at a few hundred concurrent calls a `Set` under constant
   * churn doubled what survived each young-generation collection (V8 trace-gc: 1.46 vs 0.77 MB
   * per scavenge).
   */
  private readonly inFlight: Call[] = [];
  /** The calls in flight each caller's signal would abort (its one listener holds the list too). */
  private readonly signals = new WeakMap<AbortSignal, Call[]>();
  private readonly owner: CallOwner = {
    settled: (call, answer, error) => this.settled(call, answer, error),
    context: (call) => this.context(call),
    timeoutHint: () => this.hints.timeout,
  };
  private readonly redactor: Redactor;
  private readonly baseHeaders: Record<string, string>;
  /** `baseHeaders` plus the JSON content type, for calls with a body. */
  private readonly jsonHeaders: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoff: BackoffOptions;
  private readonly apiKeySource: string;
  private readonly hints: ErrorHints;
  private readonly log: ((line: string) => void) | undefined;
  /** Whether the base URL's host is this machine's loopback. */
  private readonly loopback: boolean;

  /** @param options where to send requests, the key, timeouts and retries. */
  constructor(options: HttpTransportOptions) {
    const base = new URL(options.baseUrl);
    this.origin = base.origin;
    this.loopback = isLoopbackHost(base.hostname);
    this.prefix = base.pathname.replace(/\/+$/, "");
    this.lease = acquirePool(this.origin);
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
    return new Promise((resolve, reject) => this.send<T>(request, { answered: resolve, failed: reject }));
  }

  /**
   * {@link HttpTransport.request} with the outcome handed to `receiver` instead of a promise, for
   * callers that keep their own state per call anyway (e.g. a sampling call of a rollout): a
   * thousand calls waiting at once then hold one object each rather than a chain of promises.
   */
  send<T = unknown>(request: HttpRequest, receiver: HttpReceiver<T>): void {
    const mode = request.retry ?? (request.method === "GET" ? "all" : "unsent");
    const key = request.idempotencyKey === true ? `nexrl-retry-${randomUUID()}` : request.idempotencyKey || undefined;
    let body: string | Uint8Array | undefined;
    try {
      body = requestBodyText(request);
    } catch (error) {
      receiver.failed(error);
      return;
    }
    const common = body === undefined ? this.baseHeaders : this.jsonHeaders;
    const headers =
      key === undefined && request.headers === undefined
        ? common
        : { ...common, ...(key !== undefined && { "x-idempotency-key": key }), ...request.headers };
    const call = new Call(
      this.owner,
      request.method,
      request.path,
      request.signal,
      request.timeoutMs ?? this.timeoutMs,
      headers,
      body,
      mode,
      receiver as HttpReceiver<unknown>,
    );
    this.attempt(call);
  }

  /** Aborts calls in flight and gives the connection pool back. */
  async close(): Promise<void> {
    this.closing.abort(new Error("the client was closed"));
    for (const call of [...this.inFlight]) call.exchange!.abort(CLOSED);
    await this.lease.release();
  }

  /**
   * Starts an attempt of `call`, through {@link dispatchText}. It is given up on by a plain timer,
   * the caller's signal or `close()`, without an `AbortSignal` of its own: on Node 20
   * `AbortSignal.timeout` plus `AbortSignal.any` cost about 30 µs per request and a bare
   * `AbortController` 5 µs — as much as the rest of the client's work on a loopback round trip.
   */
  private attempt(call: Call): void {
    const caller = call.signal;
    if (caller?.aborted || this.closing.signal.aborted) {
      call.receiver.failed(new APIUserAbortError(this.context(call), this.abortReason(caller)));
      return;
    }
    // In flight before it is dispatched: a connection that cannot be had fails the exchange at once.
    call.index = this.inFlight.length;
    this.inFlight.push(call);
    if (caller) this.watch(caller, call);
    call.timer = setTimeout(timeOut, call.timeoutMs, call);
    call.exchange = dispatchText(
      this.lease.pool,
      { path: this.prefix + call.path, method: call.method, headers: call.headers, body: call.body ?? null },
      call,
    );
  }

  /** The outcome of the attempt of `call` in flight: the answer, or the error it failed with. */
  private settled(call: Call, answer: TextAnswer | undefined, error: Error | undefined): void {
    this.settle(call);
    let response: HttpResponse<unknown>;
    try {
      if (answer === undefined) throw this.failure(error, call);
      this.lease.pool.reached = true;
      response = this.answer(answer, call);
    } catch (failure) {
      this.retry(call, failure);
      return;
    }
    call.receiver.answered(response);
  }

  /** Sends `call` again after `failure` when its retry mode and the retry budget allow; else fails it with `failure`. */
  private retry(call: Call, failure: unknown): void {
    const budget = failure instanceof APIError ? this.retryBudget(failure) : 0;
    if (!(failure instanceof APIError) || call.attempt >= budget || !this.mayRetry(failure, call.mode)) {
      call.receiver.failed(failure);
      return;
    }
    call.attempt++;
    const wait =
      (failure instanceof APIError ? failure.retryAfterMs : undefined) ?? backoffDelayMs(call.attempt, this.backoff);
    this.log?.(
      this.redact(
        `nexrl http: ${call.method} ${failure.url} failed (${this.describe(failure)}); retry ${call.attempt}/${budget} in ${Math.round(wait)} ms`,
      ),
    );
    this.wait(wait, call).then(
      () => this.attempt(call),
      (error: unknown) => call.receiver.failed(error),
    );
  }

  /** Retries `failure` may get: the transport's budget, or a few for a first contact that cannot succeed soon. */
  private retryBudget(failure: APIError): number {
    if (!(failure instanceof APIConnectionError) || failure.connected || this.lease.pool.reached)
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

  /** What errors say about a call; built only for an error, as redacting headers costs. */
  private context(call: Call): APIErrorContext {
    return { method: call.method, url: this.baseUrl + call.path, requestHeaders: this.redactor.headers(call.headers) };
  }

  private async wait(ms: number, call: Call): Promise<void> {
    const signal = call.signal;
    const abort = signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal;
    try {
      await sleep(ms, abort);
    } catch {
      throw new APIUserAbortError(this.context(call), this.abortReason(signal));
    }
  }

  private abortReason(signal: AbortSignal | undefined): string {
    const source = signal?.aborted ? signal : this.closing.signal;
    const reason: unknown = source.reason;
    return this.redact(reason instanceof Error ? reason.message : String(reason ?? "aborted"));
  }

  /**
   * Lets `signal` abort `call` while it is in flight. A signal gets one listener however many
   * calls it covers (a run's stop signal may cover a thousand): Node's `addEventListener` costs a
   * few microseconds and a listener object per call, and warns past ten listeners.
   */
  private watch(signal: AbortSignal, call: Call): void {
    let calls = this.signals.get(signal);
    if (!calls) {
      const watched: Call[] = [];
      calls = watched;
      this.signals.set(signal, watched);
      const abortAll = (): void => {
        this.signals.delete(signal);
        for (const aborted of watched.splice(0)) {
          aborted.signalIndex = -1;
          aborted.exchange!.abort(new APIUserAbortError(this.context(aborted), this.abortReason(signal)));
        }
      };
      signal.addEventListener("abort", abortAll, { once: true });
    }
    call.signalIndex = calls.length;
    calls.push(call);
  }

  /** Undoes what `attempt` set up, once the attempt has settled. */
  private settle(call: Call): void {
    clearTimeout(call.timer);
    if (call.signalIndex >= 0) {
      removeAt(this.signals.get(call.signal!)!, call, "signalIndex");
      call.signalIndex = -1;
    }
    removeAt(this.inFlight, call, "index");
  }

  /** The error an attempt failed with, as the transport reports it. */
  private failure(error: unknown, call: Call): unknown {
    // Status errors, and the caller's signal and the timer, are the transport's own already.
    if (error instanceof APIError) return error;
    if (error === CLOSED) return new APIUserAbortError(this.context(call), this.abortReason(call.signal));
    const code = errorCode(error);
    return new APIConnectionError(this.context(call), !(code !== undefined && NOT_CONNECTED.has(code)), error);
  }

  /**
   * The response of a complete answer.
   * @throws {@link APIError} for a status outside 2xx.
   */
  private answer(answer: TextAnswer, call: Call): HttpResponse<unknown> {
    const responseHeaders = flatHeaders(answer.headers);
    const parsed = answer.binary ?? parseBody(answer.text, responseHeaders["content-type"]);
    const requestId = responseHeaders["x-request-id"] ?? bodyRequestId(parsed);
    if (answer.statusCode >= 200 && answer.statusCode < 300) {
      return {
        status: answer.statusCode,
        headers: responseHeaders,
        body: parsed,
        ...(requestId !== undefined && { requestId }),
      };
    }
    const retryAfter = retryAfterMs(responseHeaders);
    throw statusError(
      {
        ...this.context(call),
        status: answer.statusCode,
        body: answer.binary
          ? `(${answer.binary.byteLength} bytes of ${responseHeaders["content-type"]})`
          : this.redactor.value(parsed),
        headers: responseHeaders,
        ...(requestId !== undefined && { requestId }),
        ...(retryAfter !== undefined && { retryAfterMs: retryAfter }),
      },
      this.apiKeySource,
      this.hints,
    );
  }
}

/** Removes `call` from `list`, where `call[field]` is its index, by moving the last entry into its place. */
function removeAt(list: Call[], call: Call, field: "index" | "signalIndex"): void {
  const last = list.pop()!;
  if (last !== call) {
    list[call[field]] = last;
    last[field] = call[field];
  }
}
