/**
 * How `nexrl serve` is put together: a list of request handlers tried in order on one
 * `node:http` server. A handler answers the requests it knows and returns true; the first
 * handler that returns true wins, and a request no handler takes gets a 404.
 *
 * @module
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { clientGone, sendError } from "./io.js";
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

/** Answers a request and resolves true, or resolves false to let the next handler try. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/**
 * The `node:http` request listener trying `handlers` in order. A handler that throws a
 * {@link ProtocolError} answers with its status, another {@link NexrlError} (bad input
 * found deeper down) with 400, and any other error with 500, logged.
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
          404,
          "not_found",
          `no route for ${req.method ?? "?"} ${req.url ?? "?"}; see \`nexrl serve --help\` for the protocols served`,
        );
      } catch (error) {
        if (clientGone(req, res)) return;
        if (error instanceof NexrlError && !(error instanceof ProtocolError)) {
          sendError(res, new ProtocolError(400, "invalid_request", error.message));
          return;
        }
        if (!(error instanceof ProtocolError))
          log(
            `nexrl serve: ${req.method ?? "?"} ${req.url ?? "?"} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
          );
        sendError(res, error);
      }
    })();
  };
}
