/**
 * One HTTP request through undici's `dispatch` API, its answer collected as text. Lighter than
 * `Pool.request`, which wraps every answer in a `Readable` stream and then consumes it: for the
 * small JSON answers of sampling and training calls the stream machinery costs more than the
 * parsing.
 *
 * @module
 */
import type { Dispatcher } from "undici";
import type { Connections } from "./pools.js";

/** Response headers as undici parses them: lower-cased names, repeated headers as arrays. */
export type ResponseHeaders = Dispatcher.ResponseData["headers"];

/**
 * A complete answer: status, headers (lower-cased names) and the body decoded as UTF-8, or, for a
 * binary content type (protobuf, octet-stream), the body's bytes (and `text` empty).
 */
export interface TextAnswer {
  statusCode: number;
  headers: ResponseHeaders;
  text: string;
  binary?: Uint8Array;
}

/** Whether a `content-type` names a binary body, which is kept as bytes rather than decoded. */
export function isBinaryContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && /application\/(x-protobuf|octet-stream)/.test(contentType);
}

/**
 * Receives what became of one exchange: exactly one of the two is called, once, from within
 * undici's callbacks (or from `abort`), so neither may throw.
 */
export interface TextReceiver {
  /** The complete answer arrived. */
  textAnswered(answer: TextAnswer): void;
  /** The exchange failed with undici's error, or was given up on with the reason given to `abort`. */
  textFailed(error: Error): void;
}

/** A request in flight, and a way to give up on it. */
export interface TextExchange {
  /** Fails the exchange with `reason` at once and stops the request whenever it reaches a socket. */
  abort(reason: Error): void;
}

/** The handler of one exchange, and the exchange itself. */
class TextHandler implements Dispatcher.DispatchHandler, TextExchange {
  private controller: Dispatcher.DispatchController | undefined;
  private abortReason: Error | undefined;
  private statusCode = 0;
  private headers: ResponseHeaders = {};
  /** The body's first chunk; a small JSON answer usually comes in one. */
  private first: Buffer | undefined;
  private rest: Buffer[] | undefined;
  private settled = false;
  /** The connection of the request, until undici is done with it. */
  private connection: Dispatcher | undefined;

  constructor(
    private readonly connections: Connections,
    private readonly receiver: TextReceiver,
  ) {}

  abort(reason: Error): void {
    this.fail(reason);
    if (this.controller) this.controller.abort(reason);
    else this.abortReason = reason;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    // 1xx answers are informational: the real one follows.
    if (statusCode < 200) return;
    this.statusCode = statusCode;
    this.headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.first === undefined) this.first = chunk;
    else (this.rest ??= []).push(chunk);
  }

  onResponseEnd(): void {
    this.giveBack();
    if (this.settled) return;
    this.settled = true;
    // Concatenated before decoding: a multi-byte character may span two chunks.
    const body = this.rest ? Buffer.concat([this.first!, ...this.rest]) : this.first;
    const type = this.headers["content-type"];
    if (isBinaryContentType(Array.isArray(type) ? type.join(", ") : type)) {
      this.receiver.textAnswered({
        statusCode: this.statusCode,
        headers: this.headers,
        text: "",
        binary: body ?? new Uint8Array(0),
      });
      return;
    }
    this.receiver.textAnswered({
      statusCode: this.statusCode,
      headers: this.headers,
      text: body ? body.toString("utf8") : "",
    });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.giveBack();
    this.fail(error);
  }

  /** Sends `options` on a connection taken from `connections`; it goes back once undici is done with the request. */
  send(options: Dispatcher.DispatchOptions): void {
    try {
      this.connection = this.connections.take();
      this.connection.dispatch(options, this);
    } catch (error) {
      this.giveBack();
      this.abort(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private giveBack(): void {
    const connection = this.connection;
    if (connection === undefined) return;
    this.connection = undefined;
    this.connections.give(connection);
  }

  private fail(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.receiver.textFailed(error);
  }
}

/**
 * Sends `options` on a connection from `connections`, collects the answer as text and hands it
 * to `receiver`. No promise per exchange: the caller's own object receives the outcome, which
 * keeps what a waiting request holds small when a thousand of them wait at once.
 */
export function dispatchText(
  connections: Connections,
  options: Dispatcher.DispatchOptions,
  receiver: TextReceiver,
): TextExchange {
  const handler = new TextHandler(connections, receiver);
  handler.send(options);
  return handler;
}
