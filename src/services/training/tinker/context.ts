/**
 * What the Tinker clients of one service share: the transport, the session, the chunk limits,
 * and how requests are submitted.
 *
 * @module
 */
import type { BackoffOptions } from "../../../http/backoff.js";
import type { HttpTransport } from "../../../http/transport.js";
import type { ChunkLimits } from "./chunks.js";
import { TinkerResponseError } from "./wire.js";

/** Shared state of one Tinker service connection. */
export interface TinkerContext {
  /** The transport (X-API-Key, retries). */
  readonly http: HttpTransport;
  /** The session id from `create_session`. */
  readonly sessionId: string;
  /** Chunk limits from `client/config`. */
  readonly limits: ChunkLimits;
  /** Timeout of one `retrieve_future` poll, in milliseconds. */
  readonly pollTimeoutMs: number;
  /** Most consecutive failed polls (429, 5xx, connection errors) before giving up. */
  readonly maxRetries: number;
  /** Backoff between failed polls. */
  readonly backoff: BackoffOptions;
  /** Aborts waits when the service is closed. */
  readonly closed: AbortSignal;
  /** Receives a line per failed poll that is retried (API key redacted). */
  readonly log: ((line: string) => void) | undefined;
}

/** A request body: an object sent as JSON, or JSON already serialised (sent as it is). */
export type SubmitBody = { body: unknown } | { encodedBody: string | Uint8Array };

/**
 * Submits a request that answers with a future and returns its `request_id`. Submissions are
 * retried on every retryable failure with one idempotency key: the service deduplicates them
 * by `seq_id` (or `model_seq_id`), so a retry never applies an operation twice.
 */
export async function submitRequest(
  ctx: TinkerContext,
  endpoint: string,
  payload: SubmitBody,
  requestType: string,
  headers: Record<string, string> = {},
): Promise<string> {
  const { body: answer } = await ctx.http.request<{ request_id?: unknown }>({
    method: "POST",
    path: `/api/v1/${endpoint}`,
    ...payload,
    retry: "all",
    idempotencyKey: true,
    headers: { "X-Tinker-Request-Type": requestType, ...headers },
  });
  if (typeof answer?.request_id !== "string") {
    throw new TinkerResponseError(
      `POST /api/v1/${endpoint} answered without a request_id: ${ctx.http.redact(JSON.stringify(answer)).slice(0, 200)}`,
    );
  }
  return answer.request_id;
}
