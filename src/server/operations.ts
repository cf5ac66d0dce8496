import { NexrlError, OperationFailure, ProtocolError } from "../errors.js";
/**
 * Operations of one served model and the order they run in: requests carrying a `seq_id` run
 * strictly in `seq_id` order (a request that arrives early waits for its predecessors), and a
 * resubmitted `seq_id` returns the operation already received instead of applying it twice.
 *
 * @module
 */

/** Who is to blame for a failed operation (Tinker's `RemoteErrorCategory`). */
export type FailureCategory = "user" | "server" | "unknown";

/** How an operation ended. */
export type Outcome = { ok: true; value: unknown } | { ok: false; message: string; category: FailureCategory };

/** An operation received by the server. */
export interface Operation {
  /** What it is, e.g. `forward_backward`. */
  readonly kind: string;
  /** Resolves when it has run (it never rejects). */
  readonly done: Promise<Outcome>;
  /** True once it started running. */
  readonly started: boolean;
  /** True once it is sure to run: every operation it waits for was received (it may still be queued behind them). */
  readonly queued: boolean;
  /** Its outcome, once it has run. */
  readonly outcome: Outcome | undefined;
}

/** Fails an operation the way `nexrl serve --faults` injects an `error`: not applied, blamed on the server. */
export function injectedFailure(): never {
  throw new OperationFailure(
    "fault injected by nexrl serve --faults (error): the operation failed and was not applied",
    { category: "server" },
  );
}

class Op implements Operation {
  started = false;
  queued = false;
  outcome: Outcome | undefined;
  readonly done: Promise<Outcome>;
  private start!: () => void;
  /** What it runs; dropped once run, so a finished operation holds nothing of its model. */
  private work: (() => unknown) | undefined;

  constructor(
    readonly kind: string,
    run: () => unknown,
  ) {
    this.work = run;
    this.done = new Promise<void>((resolve) => (this.start = resolve)).then(async (): Promise<Outcome> => {
      this.started = true;
      const work = this.work!;
      this.work = undefined;
      try {
        this.outcome = { ok: true, value: await work() };
      } catch (error) {
        const category =
          error instanceof OperationFailure ? error.category : error instanceof NexrlError ? "user" : "server";
        this.outcome = { ok: false, message: error instanceof Error ? error.message : String(error), category };
      }
      return this.outcome;
    });
  }

  /** Lets it run (once its turn has come). */
  release(): Promise<Outcome> {
    this.queued = true;
    this.start();
    return this.done;
  }

  /** Ends it with `failure` instead of running it. */
  fail(failure: OperationFailure): Promise<Outcome> {
    this.work = () => {
      throw failure;
    };
    return this.release();
  }
}

/** Starts an operation that waits for nothing (sampling, model creation). */
export function runOperation(kind: string, run: () => unknown): Operation {
  const op = new Op(kind, run);
  void op.release();
  return op;
}

/**
 * The operations a server received and has not finished: closing the server waits for those that
 * will run, so that a checkpoint or sampler it was writing is complete before its folder is read
 * or removed. One still waiting for a `seq_id` that never came would never run: it is not waited for.
 */
export class InFlightOperations {
  private readonly pending = new Set<Operation>();

  /** Counts `op` until it has run. */
  add(op: Operation): void {
    this.pending.add(op);
    void op.done.then(() => this.pending.delete(op));
  }

  /** How many operations have not finished. */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Resolves once every operation sure to run (and any they led to) has run; the rest wait for
   * predecessors that never arrived.
   */
  async settled(): Promise<void> {
    for (;;) {
      const running = [...this.pending].filter((op) => op.queued);
      if (running.length === 0) return;
      await Promise.all(running.map((op) => op.done));
    }
  }
}

/** How many recent `seq_id`s are remembered for deduplication. */
const DEDUP_WINDOW = 1024;

/** The operation queue of one model. */
export class OperationQueue {
  /** The lowest `seq_id` not yet queued to run. */
  private nextSeq = 1;
  private readonly bySeq = new Map<number, Op>();
  private tail: Promise<unknown> = Promise.resolve();
  /** Operations queued to run that have not finished. */
  private queued = 0;

  /** Whether operations are queued to run or running (not counting those waiting for a missing `seq_id`). */
  get busy(): boolean {
    return this.queued > 0;
  }

  /**
   * Receives the operation with `seq_id` `seq`: it runs after every lower `seq_id`. A `seq_id`
   * received before returns that operation (nothing runs twice).
   * @throws {@link ProtocolError} 409 when `seq` was used by another kind of operation or is too
   * old to be recognised, 400 when it is not a positive integer.
   */
  submit(seq: number, kind: string, run: () => unknown): Operation {
    if (!Number.isSafeInteger(seq) || seq < 1)
      throw new ProtocolError(`seq_id must be an integer >= 1, got ${seq}`, { status: 400, code: "invalid_seq_id" });
    const known = this.bySeq.get(seq);
    if (known) {
      if (known.kind !== kind)
        throw new ProtocolError(
          `seq_id ${seq} was already used by a ${known.kind} request; each request of a model needs the next seq_id`,
          { status: 409, code: "seq_id_conflict" },
        );
      return known;
    }
    if (seq < this.nextSeq) {
      throw new ProtocolError(
        `seq_id ${seq} ran long ago and is no longer remembered (the server keeps the last ${DEDUP_WINDOW}); resubmit only recent requests`,
        { status: 409, code: "seq_id_expired" },
      );
    }
    const op = new Op(kind, run);
    this.bySeq.set(seq, op);
    for (let next = this.bySeq.get(this.nextSeq); next; next = this.bySeq.get(this.nextSeq)) {
      this.enqueue(next);
      this.nextSeq++;
    }
    if (this.bySeq.size > 2 * DEDUP_WINDOW) {
      for (const old of this.bySeq.keys()) if (old < this.nextSeq - DEDUP_WINDOW) this.bySeq.delete(old);
    }
    return op;
  }

  /** Receives an operation without a `seq_id`: it runs after every operation already queued. */
  append(kind: string, run: () => unknown): Operation {
    const op = new Op(kind, run);
    this.enqueue(op);
    return op;
  }

  /**
   * Closes the queue when its model is unloaded: operations still waiting for a missing `seq_id`
   * fail with `reason` (they would never run), and the returned promise resolves once those
   * already queued have run.
   */
  close(reason: string): Promise<void> {
    for (const [seq, op] of this.bySeq)
      if (seq >= this.nextSeq) void op.fail(new OperationFailure(reason, { category: "user" }));
    this.bySeq.clear();
    return this.tail.then(() => undefined);
  }

  private enqueue(op: Op): void {
    op.queued = true;
    this.queued++;
    this.tail = this.tail.then(() => op.release()).finally(() => this.queued--);
  }
}
