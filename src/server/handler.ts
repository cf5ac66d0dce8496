/**
 * How `nexrl serve` is put together: a list of request handlers tried in order on one
 * `node:http` server. A handler answers the requests it knows and returns true; the first
 * handler that returns true wins, and a request no handler takes gets a 404.
 *
 * @module
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { clientGone, requestPath, sendError } from "./io.js";
import { sendOpenAIError } from "./openai-protocol.js";
import { NexrlError, ProtocolError } from "../errors.js";

/** A request as a protocol handler parsed it, handed to request observers (tests capture bodies with it). */
export interface CapturedRequest {
  /** The protocol that took it. */
  protocol: "tinker" | "weaver";
  /** HTTP method. */
  method: string;
  /** Path without the query string. */
  path: string;
  /** Request headers as received. */
  headers: IncomingHttpHeaders;
  /**
   * Parsed JSON body (`{}` when empty); a protobuf body read into the JSON generation's shape,
   * with its `forward_only` added.
   */
  body: unknown;
  /** The body's bytes as received, for a protobuf body (compressed when it came compressed). */
  rawBody?: Uint8Array;
}

/**
 * Whether `req` comes from an OpenAI client, whose errors must be in OpenAI's shape
 * (`{error: {message, type, param, code}}`) for the client to show their message: a path under
 * `/v1/`, or an OpenAI SDK's User-Agent (`OpenAI/JS …`, `OpenAI/Python …`) on any path, such as
 * an OpenAI client pointed at the Tinker or Weaver prefix.
 */
export function speaksOpenAI(req: IncomingMessage): boolean {
  return requestPath(req).startsWith("/v1/") || /^OpenAI\//i.test(req.headers["user-agent"] ?? "");
}

/** OpenAI's error type for an HTTP status. */
function openAIType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  return status >= 500 ? "server_error" : "invalid_request_error";
}

/** `error` as the ProtocolError answered to an OpenAI client: its status and code, with OpenAI's type. */
function toOpenAIError(error: ProtocolError): ProtocolError {
  if (error.openaiType !== undefined) return error;
  return new ProtocolError(error.message, {
    status: error.status,
    ...(error.openaiCode !== null && { code: error.openaiCode }),
    headers: error.headers,
    openaiType: openAIType(error.status),
    ...(error.param !== null && { param: error.param }),
  });
}

/** Answers a request and resolves true, or resolves false to let the next handler try. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/**
 * The `node:http` request listener trying `handlers` in order. A handler that throws a
 * {@link ProtocolError} answers with its status, another {@link NexrlError} (bad input
 * found deeper down) with 400, and any other error with 500, logged; in OpenAI's error shape for
 * an OpenAI client (see {@link speaksOpenAI}), else in the Tinker and Weaver shape.
 */
export function composeHandlers(
  handlers: readonly RequestHandler[],
  log: (line: string) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void (async () => {
      try {
        for (const handler of handlers) {
          if (await handler(req, res)) return;
        }
        throw new ProtocolError(
          `no route for ${req.method ?? "?"} ${req.url ?? "?"}; see \`nexrl serve --help\` for the protocols served`,
          { status: 404, code: "not_found" },
        );
      } catch (error) {
        if (clientGone(req, res)) return;
        let answer: ProtocolError;
        if (error instanceof ProtocolError) answer = error;
        else if (error instanceof NexrlError)
          answer = new ProtocolError(error.message, { status: 400, code: "invalid_request" });
        else {
          log(
            `nexrl serve: ${req.method ?? "?"} ${req.url ?? "?"} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
          );
          answer = new ProtocolError(error instanceof Error ? error.message : String(error), {
            status: 500,
            code: "internal_error",
          });
        }
        if (speaksOpenAI(req)) sendOpenAIError(res, toOpenAIError(answer), answer.headers);
        else sendError(res, answer);
      }
    })();
  };
}
