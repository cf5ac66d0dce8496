/**
 * {@link TinkerFuture}: the answer of a submitted Tinker request, fetched by long-polling
 * `retrieve_future` (wire-protocols §1.5).
 *
 * @module
 */
import { backoffDelayMs } from "../../http/backoff.js";
import { isTransient, waitBefore } from "../remote/session.js";
import type { ApiFuture } from "../../contracts/training.js";
import type { TinkerContext } from "./context.js";
import { APIError, type RemoteErrorCategory, RemoteOperationError } from "../../errors.js";

/** Bare 400s (which a proxy may inject) tolerated per poll loop before one is final. */
const MAX_BAD_REQUESTS = 3;

const CATEGORIES = new Set<RemoteErrorCategory>(["user", "server", "unknown"]);

/**
 * A submitted request's future. `result()` polls `retrieve_future` until the answer is there:
 * `try_again` and 408 poll again at once; 410 (the promise expired) resubmits the original
 * request, which the service deduplicates by `seq_id`, and polls the new request id; 429, 5xx
 * (unless the service says not to retry), broken connections and timeouts back off (honouring
 * `retry-after`). 410s and those failures end the wait after `maxRetries` in a row;
 * `{error, category}` rejects with {@link RemoteOperationError}; any other error status rejects
 * with its typed error.
 */
export class TinkerFuture<T> implements ApiFuture<T> {
  private answer: Promise<T> | undefined;

  /**
   * @param ctx the service connection.
   * @param requestId the `request_id` the submission answered.
   * @param resubmit sends the original request again and returns its new `request_id`.
   * @param read turns the answer into the result.
   * @param what names the request in errors.
   * @param accept `Accept` of the polls, for results the server may answer in protobuf (sample
   *   and forward_backward results); JSON otherwise.
   */
  constructor(
    private readonly ctx: TinkerContext,
    private requestId: string,
    private readonly resubmit: () => Promise<string>,
    private readonly read: (body: unknown) => T,
    private readonly what: string,
    private readonly accept?: string,
  ) {}

  /** Polls until the answer arrives (once; later calls share the same promise). */
  result(): Promise<T> {
    this.answer ??= this.poll();
    return this.answer;
  }

  private async poll(): Promise<T> {
    let failures = 0;
    let badRequests = 0;
    for (let iteration = 0; ; iteration++) {
      let body: unknown;
      try {
        ({ body } = await this.ctx.request({
          method: "POST",
          path: "/api/v1/retrieve_future",
          body: { request_id: this.requestId, allow_metadata_only: false },
          retry: "none",
          timeoutMs: this.ctx.pollTimeoutMs,
          headers: {
            "X-Tinker-Request-Iteration": String(iteration),
            ...(this.accept !== undefined && { accept: this.accept }),
          },
        }));
      } catch (error) {
        if (error instanceof APIError && error.status === 408) {
          failures = 0;
          continue;
        }
        if (error instanceof APIError && error.status === 410) {
          if (++failures > this.ctx.maxRetries) throw error;
          this.requestId = await this.resubmit();
          continue;
        }
        if (error instanceof APIError && error.status === 400 && ++badRequests <= MAX_BAD_REQUESTS) continue;
        if (!isTransient(error) || ++failures > this.ctx.maxRetries) throw error;
        const wait =
          (error instanceof APIError ? error.retryAfterMs : undefined) ?? backoffDelayMs(failures, this.ctx.backoff);
        this.ctx.log?.(
          this.ctx.http.redact(
            `nexrl tinker: polling ${this.what} failed (${(error as Error).message}); retry ${failures}/${this.ctx.maxRetries} in ${Math.round(wait)} ms`,
          ),
        );
        await waitBefore(this.ctx, wait, "POST", "/api/v1/retrieve_future");
        continue;
      }
      failures = 0;
      // A binary answer is the result itself (protobuf); only JSON answers say try_again or error.
      if (body instanceof Uint8Array) return this.read(body);
      const answer = body && typeof body === "object" ? (body as Record<string, unknown>) : {};
      if (answer.type === "try_again") continue;
      if (typeof answer.error === "string" && typeof answer.category === "string") {
        const category = CATEGORIES.has(answer.category as RemoteErrorCategory)
          ? (answer.category as RemoteErrorCategory)
          : "unknown";
        const serviceMessage = this.ctx.http.redact(answer.error);
        throw new RemoteOperationError(
          `${this.what} failed on the Tinker service (${category} error): ${serviceMessage}${
            category === "user"
              ? "; fix the request (inputs, names, paths) and submit it again"
              : "; retry later, or report it if it persists"
          }`,
          { service: "tinker", category, serviceMessage },
        );
      }
      return this.read(body);
    }
  }
}
