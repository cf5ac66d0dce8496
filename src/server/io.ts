/**
 * Reading and answering JSON requests on the server side.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { prettifyError, type z } from "zod";
import { ProtocolError } from "../errors.js";

/**
 * Largest request body accepted, in bytes (also the most a compressed body may expand to): twice
 * the JSON of the largest chunk the Tinker SDK sends (1,024 datums of 512 tokens with weights,
 * logprobs and advantages, about 30 MB), so that no request makes the server parse more than it
 * can ever need.
 */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * Reads a request body's bytes.
 * @param maxBytes the largest body accepted (default {@link MAX_BODY_BYTES}, 64 MiB).
 * @param tooLarge the error of a larger body (default: {@link ProtocolError} 413 `body_too_large`).
 */
export async function readBody(
  req: IncomingMessage,
  maxBytes = MAX_BODY_BYTES,
  tooLarge: () => Error = () =>
    new ProtocolError(
      `the request body exceeds ${maxBytes} bytes (${Math.round(maxBytes / 2 ** 20)} MiB); send fewer datums per call`,
      { status: 413, code: "body_too_large" },
    ),
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Reads and parses a JSON request body (an empty body reads as `{}`).
 * @throws {@link ProtocolError} 400 for invalid JSON, 413 for a body over 64 MiB.
 */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  return parseJsonBody(await readBody(req));
}

/**
 * Parses the bytes of a JSON request body (empty reads as `{}`).
 * @throws {@link ProtocolError} 400 for invalid JSON.
 */
export function parseJsonBody(bytes: Buffer): unknown {
  const text = bytes.toString("utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ProtocolError(`the request body is not valid JSON: ${(error as Error).message}`, {
      status: 400,
      code: "invalid_json",
    });
  }
}

/**
 * A request body parsed with its schema.
 * @param what names the request in the message (`forward_backward`, `createModel`).
 * @throws {@link ProtocolError} 422 `invalid_body` saying what is wrong.
 */
export function parseBody<T>(schema: z.ZodType<T>, what: string, raw: unknown): T {
  const result = schema.safeParse(raw);
  if (!result.success)
    throw new ProtocolError(`invalid ${what} body:\n${prettifyError(result.error)}`, {
      status: 422,
      code: "invalid_body",
    });
  return result.data;
}

/** Answers with a JSON body. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Answers an error: a {@link ProtocolError} with its status, anything else with 500. */
export function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (error instanceof ProtocolError) {
    sendJson(
      res,
      error.status,
      { error: error.code, message: error.message, retryable: error.status === 429 || error.status >= 500 },
      error.headers,
    );
  } else {
    sendJson(res, 500, {
      error: "internal_error",
      message: error instanceof Error ? error.message : String(error),
      retryable: true,
    });
  }
}

/**
 * Whether the client has gone (closed the connection before the answer): a failure then is
 * the client's choice, not the server's, and there is no one to answer.
 */
export function clientGone(req: IncomingMessage, res: ServerResponse): boolean {
  // The connection, not the request stream: a server that stops reading a body destroys the stream itself.
  const socket = (res.socket ?? req.socket) as Socket | null;
  return !res.writableFinished && (res.destroyed || socket === null || socket.destroyed);
}

/** The request's path without the query string. */
export function requestPath(req: IncomingMessage): string {
  return (req.url ?? "/").split("?")[0] ?? "/";
}
