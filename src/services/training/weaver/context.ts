/**
 * What the Weaver clients of one service share, and how they submit operations.
 *
 * @module
 */
import type { HttpTransport } from "../../../http/transport.js";
import { WeaverOperation, type PollOptions } from "./operation.js";

/** Shared state of one Weaver service connection. */
export interface WeaverContext {
  /** The transport (X-WEAVER-API-KEY). */
  readonly http: HttpTransport;
  /** The session id. */
  readonly sessionId: string;
  /** How operations are polled. */
  readonly poll: PollOptions;
  /** Aborts waits when the service is closed. */
  readonly closed: AbortSignal;
  /** Receives a line per failed poll that is retried (API key redacted). */
  readonly log: ((line: string) => void) | undefined;
}

/**
 * POSTs a request that answers with an operation and returns the operation's future. The POST
 * is sent again only when its connection was never made: Weaver operations are not idempotent.
 */
export async function submitOperation<T>(
  ctx: WeaverContext,
  path: string,
  body: unknown,
  read: (response: unknown) => T,
  what: string,
): Promise<WeaverOperation<T>> {
  const { body: operation } = await ctx.http.request({ method: "POST", path, body, retry: "unsent" });
  return new WeaverOperation(ctx, operation, read, what);
}
