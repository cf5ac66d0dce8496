/**
 * What the Weaver clients of one service share, and how they submit operations.
 *
 * @module
 */
import type { RemoteContext } from "../remote/session.js";
import { WeaverOperation, type PollingContext } from "./operation.js";

/** Shared state of one Weaver service connection: the session, and how operations are polled. */
export interface WeaverContext extends RemoteContext, PollingContext {}

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
