/**
 * {@link WeaverOperation}: a submitted Weaver operation, polled with `GET /api/v1/operations/{id}`
 * until it is `done` or `error`.
 *
 * @module
 */
import { isTransient, waitBefore, type RemoteContext } from "../remote/session.js";
import type { ApiFuture } from "../../contracts/training.js";
import { field, stringField } from "./fields.js";
import { APIError, RemoteOperationError, type RemoteErrorCategory } from "../../errors.js";

/** Who a Weaver `error_code` blames: `invalid_request` the caller, `internal_error` the service; others are unknown. */
function categoryOf(code: string): RemoteErrorCategory {
  return code === "invalid_request" ? "user" : code === "internal_error" ? "server" : "unknown";
}

/** How operations are polled. */
export interface PollOptions {
  /** First delay between polls in milliseconds (500); it doubles up to `maxIntervalMs`. */
  intervalMs: number;
  /** Longest delay between polls in milliseconds (10 000). */
  maxIntervalMs: number;
  /** Transient poll failures (429, 5xx, broken connections) tolerated in a row (20). */
  transientRetries: number;
}

/** What polling an operation uses of the service connection: its transport, close signal and log, and how to poll. */
export interface PollingContext extends Pick<RemoteContext, "http" | "closed" | "log"> {
  /** How operations are polled. */
  readonly poll: PollOptions;
}

/** Default {@link PollOptions}: 0.5 s doubling to 10 s, 20 transient failures. */
export const DEFAULT_POLL: Readonly<PollOptions> = Object.freeze({
  intervalMs: 500,
  maxIntervalMs: 10_000,
  transientRetries: 20,
});

/**
 * A Weaver operation's future. `result()` polls (0.5 s doubling to 10 s by default) until the
 * operation is `done` and returns its `response`, or rejects with {@link RemoteOperationError}
 * when it ends in `error`. Transient poll failures are tolerated up to `transientRetries` in a
 * row, the poll delay doubling as backoff (and at least any `retry-after`).
 */
export class WeaverOperation<T> implements ApiFuture<T> {
  private answer: Promise<T> | undefined;

  /**
   * @param ctx the service connection (transport, polling intervals, close signal, log).
   * @param initial the operation object the submission answered.
   * @param read turns the operation's `response` into the result.
   * @param what names the request in errors.
   */
  constructor(
    private readonly ctx: PollingContext,
    private readonly initial: unknown,
    private readonly read: (response: unknown) => T,
    private readonly what: string,
  ) {}

  /** Polls until the operation ends (once; later calls share the same promise). */
  result(): Promise<T> {
    this.answer ??= this.wait();
    return this.answer;
  }

  private async wait(): Promise<T> {
    let operation = this.initial;
    const path = `/api/v1/operations/${encodeURIComponent(stringField(operation, "id", `${this.what} operation`))}`;
    let delay = this.ctx.poll.intervalMs;
    let failures = 0;
    for (;;) {
      const status = field(operation, "status");
      if (status === "done") return this.read(field(operation, "response"));
      if (status === "error") {
        const code = field(operation, "error_code") ?? field(operation, "error") ?? "error";
        const message = field(operation, "error_message") ?? "no message";
        const serviceMessage = this.ctx.http.redact(String(message));
        throw new RemoteOperationError(
          `${this.what} failed on the Weaver service (${String(code)}): ${serviceMessage}; check the request's inputs, or retry if the service was at fault`,
          {
            service: "weaver",
            category: categoryOf(String(code)),
            serviceMessage,
            serviceCode: String(code),
            details: field(operation, "error_details"),
          },
        );
      }
      await waitBefore(this.ctx, delay, "GET", path);
      delay = Math.min(delay * 2, this.ctx.poll.maxIntervalMs);
      try {
        ({ body: operation } = await this.ctx.http.request({
          method: "GET",
          path,
          retry: "none",
        }));
        failures = 0;
      } catch (error) {
        if (!isTransient(error) || ++failures > this.ctx.poll.transientRetries) throw error;
        this.ctx.log?.(
          this.ctx.http.redact(
            `nexrl weaver: polling ${this.what} failed (${(error as Error).message}); retry ${failures}/${this.ctx.poll.transientRetries}`,
          ),
        );
        // The doubling delay is the backoff; a retry-after asks for at least that long.
        if (error instanceof APIError && error.retryAfterMs !== undefined) delay = Math.max(delay, error.retryAfterMs);
      }
    }
  }
}
