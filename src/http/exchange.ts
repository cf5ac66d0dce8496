/**
 * {@link Exchange}: one HTTP request through undici's `dispatch` API, its answer collected whole,
 * with a timeout. Answers are small JSON bodies read at once, so no stream is needed (see
 * bench/README.md).
 *
 * @module
 */
import type { Dispatcher } from "undici";
import { NexrlError } from "../errors.js";

/** A complete answer: status, headers as undici parses them (lower-cased names) and the body's bytes. */
export interface Answer {
  status: number;
  headers: Dispatcher.ResponseData["headers"];
  body: Buffer;
}

/** What an exchange's answer rejects with when its timeout passes. */
export const TIMED_OUT = new NexrlError("the exchange timed out");

/** Gives up on `exchange` once its timeout passes. */
function timeOut(exchange: Exchange): void {
  exchange.abort(TIMED_OUT);
}

/** A request in flight: its answer, and a way to give up on it. */
export class Exchange implements Dispatcher.DispatchHandler {
  /**
   * The answer; rejects with undici's error, with {@link TIMED_OUT} when the timeout passes, or
   * with the reason given to {@link Exchange.abort}.
   */
  readonly answer: Promise<Answer>;
  private resolve!: (answer: Answer) => void;
  private reject!: (error: Error) => void;
  private controller: Dispatcher.DispatchController | undefined;
  private abortReason: Error | undefined;
  private status = 0;
  private headers: Answer["headers"] = {};
  private readonly chunks: Buffer[] = [];
  private readonly timer: NodeJS.Timeout;

  /**
   * Sends `options` through `dispatcher`. undici reports every failure to the handler, a closed
   * dispatcher's at once, so the answer rejects rather than the constructor throwing.
   * @param timeoutMs milliseconds until the exchange is given up on, waiting for a connection included.
   */
  constructor(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, timeoutMs: number) {
    this.answer = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(timeOut, timeoutMs, this);
    dispatcher.dispatch(options, this);
  }

  /** Fails the answer with `reason` at once, and stops the request wherever it is (queued, sent or answering). */
  abort(reason: Error): void {
    clearTimeout(this.timer);
    this.reject(reason);
    if (this.controller) this.controller.abort(reason);
    else this.abortReason = reason;
  }

  /** @internal */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  /** @internal */
  onResponseStart(_controller: Dispatcher.DispatchController, status: number, headers: Answer["headers"]): void {
    // 1xx answers are informational: the real one follows.
    if (status < 200) return;
    this.status = status;
    this.headers = headers;
  }

  /** @internal */
  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  /** @internal */
  onResponseEnd(): void {
    clearTimeout(this.timer);
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.resolve({ status: this.status, headers: this.headers, body });
  }

  /** @internal */
  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    clearTimeout(this.timer);
    this.reject(error);
  }
}
