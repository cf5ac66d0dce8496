/**
 * {@link RemoteSession}: what a remote training service (Tinker, Weaver) does the same way
 * around its own protocol — the HTTP transport with the key and base URL from the options or the
 * environment (the key redacted from every error and log line), one session opened on first use,
 * heartbeats that never keep the process alive, waits that end when the service is closed, and
 * closing.
 *
 * @module
 */
import { sleep, type BackoffOptions } from "../../http/backoff.js";
import { resolveEndpoint, type EndpointOptions, type EndpointSpec } from "../../http/endpoint.js";
import { Heartbeat } from "../../http/heartbeat.js";
import { HttpTransport } from "../../http/transport.js";
import { APIConnectionError, APIError, APITimeoutError, APIUserAbortError } from "../../errors.js";

/** Options every remote training service takes; the key and base URL fall back to the environment. */
export interface RemoteServiceOptions extends EndpointOptions {
  /** Timeout of each HTTP call in milliseconds (60 000). */
  timeoutMs?: number;
  /**
   * Most retries of a failed call (10). Tinker retries every call (the service deduplicates
   * them) and also gives up polling after this many failed polls in a row; Weaver retries only
   * GETs and calls whose connection was never made.
   */
  maxRetries?: number;
  /** Backoff between retries (0.5 s doubling to 10 s, jittered). */
  backoff?: Partial<BackoffOptions>;
  /** Milliseconds between session heartbeats (Tinker 10 000, Weaver 30 000, as their SDKs). */
  heartbeatIntervalMs?: number;
  /** Receives retry and heartbeat warnings, API key redacted (default: none). */
  log?: (line: string) => void;
}

/** One remote service: its name (its settings are `<NAME>_API_KEY` and `<NAME>_BASE_URL`) and how it is reached. */
export interface RemoteServiceSpec {
  /** The service's name in messages, e.g. `Tinker`. */
  service: string;
  /** The header the key travels in, e.g. `X-API-Key`. */
  keyHeader: string;
  /** Base URL when neither the options nor the environment give one. */
  defaultUrl: string;
  /** Milliseconds between heartbeats when the options give none. */
  heartbeatIntervalMs: number;
}

/** What every client of one remote session shares. */
export interface RemoteContext {
  /** The transport (the key's header, retries, redaction). */
  readonly http: HttpTransport;
  /** The session id. */
  readonly sessionId: string;
  /** Aborted when the service is closed: ends the waits of polls and retries. */
  readonly closed: AbortSignal;
  /** Receives a line per failed call or poll that is retried (API key redacted). */
  readonly log: ((line: string) => void) | undefined;
}

/** A session a service opened: its context, and how it is kept alive and stopped. */
export interface OpenedSession<C extends RemoteContext> {
  /** What the service's clients share. */
  context: C;
  /** Sends one heartbeat. */
  beat(): Promise<void>;
  /** Stops what opening started besides the heartbeats (Tinker's JWT refresh). */
  stop?(): void;
}

/**
 * The transport and session of one remote service. The session is opened by the service's
 * `open` on first use, once; an attempt that fails is made again on the next call. Heartbeats
 * start when it opens and never keep the process alive.
 */
export class RemoteSession<C extends RemoteContext> {
  /** The transport, with the service's key in its header. */
  readonly http: HttpTransport;
  private readonly closing = new AbortController();
  private opened: Promise<{ session: OpenedSession<C>; heartbeat: Heartbeat }> | undefined;

  /**
   * @param spec how the service names its settings.
   * @param options the key, base URL, timeouts, retries, heartbeat interval and log.
   * @param open creates the session on the service (with this session's transport and close signal).
   * @throws ConfigError when neither the options nor the environment hold a key.
   */
  constructor(
    private readonly spec: RemoteServiceSpec,
    private readonly options: RemoteServiceOptions,
    private readonly open: (remote: RemoteSession<C>) => Promise<OpenedSession<C>>,
  ) {
    const prefix = spec.service.toUpperCase();
    const endpoint: EndpointSpec = { ...spec, keyVar: `${prefix}_API_KEY`, urlVar: `${prefix}_BASE_URL` };
    const { apiKey, baseUrl } = resolveEndpoint(options, endpoint);
    this.http = new HttpTransport({
      baseUrl,
      apiKey,
      apiKeyHeader: spec.keyHeader,
      apiKeySource: endpoint.keyVar,
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      ...(options.maxRetries !== undefined && { maxRetries: options.maxRetries }),
      ...(options.backoff && { backoff: options.backoff }),
      ...(options.log && { log: options.log }),
    });
  }

  /** Aborted by {@link RemoteSession.close}. */
  get closed(): AbortSignal {
    return this.closing.signal;
  }

  /** The session's context, opening the session first. */
  async context(): Promise<C> {
    this.opened ??= this.start().catch((error: unknown) => {
      this.opened = undefined;
      throw error;
    });
    return (await this.opened).session.context;
  }

  /**
   * Aborts the waits in flight, stops the heartbeats, runs `release` while the transport is
   * still open (Weaver terminates its models there), and releases the connections.
   */
  async close(reason: string, release?: () => Promise<void>): Promise<void> {
    this.closing.abort(new Error(reason));
    const opened = await this.opened?.catch(() => undefined);
    opened?.heartbeat.stop();
    opened?.session.stop?.();
    await release?.();
    await this.http.close();
  }

  private async start(): Promise<{ session: OpenedSession<C>; heartbeat: Heartbeat }> {
    const session = await this.open(this);
    const heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatIntervalMs ?? this.spec.heartbeatIntervalMs,
      label: `${this.spec.service} session ${session.context.sessionId}`,
      ...(this.options.log && { log: this.options.log }),
      beat: () => session.beat(),
    });
    return { session, heartbeat };
  }
}

/**
 * True for failures a poll outlives: a status the service marks retryable (408, 429 and 5xx
 * unless it says otherwise), a broken connection, a timeout.
 */
export function isTransient(error: unknown): boolean {
  return (
    (error instanceof APIError && error.isRetryable) ||
    error instanceof APIConnectionError ||
    error instanceof APITimeoutError
  );
}

/**
 * Waits `ms` before sending `method path` (again), unless the service is closed first.
 * @throws APIUserAbortError naming the request when the service is closed.
 */
export async function waitBefore(
  ctx: Pick<RemoteContext, "http" | "closed">,
  ms: number,
  method: string,
  path: string,
): Promise<void> {
  try {
    await sleep(ms, ctx.closed);
  } catch {
    throw APIUserAbortError.fromReason({ method, url: `${ctx.http.baseUrl}${path}` }, "the service was closed");
  }
}
