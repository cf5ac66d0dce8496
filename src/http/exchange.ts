/**
 * {@link Exchange}: one HTTP request on a connection of a {@link ConnectionPool}, through undici's
 * `dispatch` API, its answer collected whole, with a timeout. Answers are small JSON bodies read
 * at once, so no stream is needed (see bench/README.md).
 *
 * @module
 */
import type { Client, Dispatcher } from "undici";
import { NexrlError } from "../errors.js";
import type { ConnectionPool, PooledExchange } from "./pools.js";

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
export class Exchange implements Dispatcher.DispatchHandler, PooledExchange {
  /**
   * The answer; rejects with undici's error, with {@link TIMED_OUT} when the timeout passes, or
   * with the reason given to {@link Exchange.abort}.
   */
  readonly answer: Promise<Answer>;
  private resolve!: (answer: Answer) => void;
  private reject!: (error: Error) => void;
  /** Whether the answer has resolved or rejected. */
  private settled = false;
  /** The connection carrying the request, once it has one. */
  private client: Client | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  private abortReason: Error | undefined;
  private status = 0;
  private headers: Answer["headers"] = {};
  private readonly chunks: Buffer[] = [];
  private readonly timer: NodeJS.Timeout;

  /**
   * Sends `options` on a connection of `pool`, at once or when one is free. Every failure, a
   * closed pool's too, rejects the answer rather than the constructor throwing.
   * @param timeoutMs milliseconds until the exchange is given up on, waiting for a connection included.
   */
  constructor(
    private readonly pool: ConnectionPool,
    private readonly options: Dispatcher.DispatchOptions,
    timeoutMs: number,
  ) {
    this.answer = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(timeOut, timeoutMs, this);
    pool.send(this);
  }

  /**
   * Sends the request on `client`, lent by the pool; returns false, and leaves `client` to the
   * pool, when the exchange was given up on while it waited.
   */
  start(client: Client): boolean {
    if (this.settled) return false;
    this.client = client;
    client.dispatch(this.options, this);
    return true;
  }

  /** Fails the answer with `reason` at once, and stops the request wherever it is (waiting, sent or answering). */
  abort(reason: Error): void {
    this.fail(reason);
    if (this.controller) this.controller.abort(reason);
    else this.abortReason = reason;
  }

  /** Fails the answer with `error` (once); the request itself goes on, if it started. */
  fail(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.reject(error);
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
    this.pool.giveBack(this.client!);
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.resolve({ status: this.status, headers: this.headers, body });
  }

  /** @internal */
  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.pool.giveBack(this.client!);
    this.fail(error);
  }
}
