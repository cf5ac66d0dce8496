/**
 * What the Tinker clients of one service share: the transport, the session, what was negotiated
 * with the server, and how requests are sent (JWT, billing pauses) and submitted.
 *
 * @module
 */
import type { BackoffOptions } from "../../http/backoff.js";
import type { HttpRequest, HttpResponse, HttpTransport } from "../../http/transport.js";
import { waitBefore, type RemoteContext } from "../remote/session.js";
import type { BillingPause } from "./billing.js";
import type { ChunkLimits } from "./chunks.js";
import type { TinkerNegotiation } from "./generation.js";
import type { JwtCredential } from "./jwt.js";
import { APIError, RemoteOperationError, UnexpectedResponseError } from "../../errors.js";

/** Options of one {@link TinkerContext.request}. */
export interface TinkerRequestOptions {
  /** Wait out 402 answers (default true; heartbeats do not). */
  billingPause?: boolean;
}

/** Shared state of one Tinker service connection: the session, and what was negotiated with the server. */
export interface TinkerContext extends RemoteContext {
  /** The wire generation and flags agreed with the server. */
  readonly negotiation: TinkerNegotiation;
  /** Chunk limits from `client/config`. */
  readonly limits: ChunkLimits;
  /** Timeout of one `retrieve_future` poll, in milliseconds. */
  readonly pollTimeoutMs: number;
  /** Most consecutive failed polls (429, 5xx, connection errors) before giving up. */
  readonly maxRetries: number;
  /** Backoff between failed polls. */
  readonly backoff: BackoffOptions;
  /**
   * Sends a request through {@link RemoteContext.http} with the session's credential (the JWT
   * when the server exchanges keys for JWTs) and waits out billing pauses (402).
   */
  request<T = unknown>(request: HttpRequest, options?: TinkerRequestOptions): Promise<HttpResponse<T>>;
}

/** What {@link tinkerRequester} needs. */
export interface TinkerRequesterOptions {
  /** The transport. */
  http: HttpTransport;
  /** The JWT sent in `X-API-Key` instead of the key, when the server enables them. */
  jwt: JwtCredential | undefined;
  /** The billing-pause state of the service. */
  billing: BillingPause;
  /** Wait between retries of a call answered 402, in milliseconds (the SDK waits 5 s). */
  billingRetryMs: number;
  /** Aborts billing waits when the service is closed. */
  closed: AbortSignal;
  /** Receives billing-pause lines. */
  log: ((line: string) => void) | undefined;
}

/** The {@link TinkerContext.request} of a connection. */
export function tinkerRequester(options: TinkerRequesterOptions): TinkerContext["request"] {
  const { http, jwt, billing } = options;
  return async <T>(request: HttpRequest, callOptions: TinkerRequestOptions = {}): Promise<HttpResponse<T>> => {
    for (;;) {
      const credential = jwt && (await jwt.token());
      if (credential) http.addSecret(credential);
      try {
        return await http.request<T>(
          credential ? { ...request, headers: { ...request.headers, "X-API-Key": credential } } : request,
        );
      } catch (error) {
        if (!(error instanceof APIError) || error.status !== 402 || callOptions.billingPause === false) throw error;
        if (!billing.shouldPause(error.message, options.log)) {
          throw new RemoteOperationError(
            `${error.message} The service has answered 402 for ${Math.round(billing.pausedMs / 1000)} s, longer than the ${Math.round(billing.maxPauseSeconds)} s it allows to wait (billing_exception_max_pause_duration_sec); sort out the account's billing and run again`,
            { service: "tinker", category: "user", serviceMessage: error.message, cause: error },
          );
        }
        await waitBefore(options, options.billingRetryMs, request.method, request.path);
      }
    }
  };
}

/** A request body: an object sent as JSON, or a body already serialised (sent as it is). */
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
  const { body: answer } = await ctx.request<{ request_id?: unknown }>({
    method: "POST",
    path: `/api/v1/${endpoint}`,
    ...payload,
    retry: "all",
    idempotencyKey: true,
    headers: { "X-Tinker-Request-Type": requestType, ...headers },
  });
  if (typeof answer?.request_id !== "string") {
    throw new UnexpectedResponseError(
      `POST /api/v1/${endpoint} answered without a request_id: ${ctx.http.redact(JSON.stringify(answer)).slice(0, 200)}`,
    );
  }
  return answer.request_id;
}
