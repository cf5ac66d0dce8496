/**
 * {@link RemoteLogger}: what the MLflow and W&B loggers share. Rows are queued and sent in the
 * background ({@link BackgroundSender}), so a step never waits for the server; a server that
 * fails is warned about once and the rows wait until it answers again. The state a resume needs
 * (the remote run's id, the last step the server took) is kept in a JSON file of the run folder,
 * which never holds a credential.
 * @module
 * @internal
 */
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { MetricsRow } from "../events.js";
import { BackgroundSender } from "./background.js";
import type { RunEnd, RunStart } from "./types.js";

/** A row waiting to be sent, with the time it was logged (sent again unchanged on a retry). */
interface QueuedRow {
  row: MetricsRow;
  /** Milliseconds since the epoch. */
  time: number;
}

/** The part of a remote logger's state file every logger has. */
export interface RemoteState {
  /** The last step the server acknowledged; -1 before the first. */
  sent_through: number;
}

/** The finite numbers of a metrics row but its step. */
export function numericMetrics(row: MetricsRow): Array<[string, number]> {
  return Object.entries(row).flatMap(([key, value]) =>
    key !== "step" && typeof value === "number" && Number.isFinite(value) ? [[key, value] as [string, number]] : [],
  );
}

/** A remote logger: the queue, the state file and the end of the run; subclasses send. */
export abstract class RemoteLogger<State extends RemoteState> {
  /** Rows not yet acknowledged, oldest first. */
  protected readonly queue: QueuedRow[] = [];
  /** How the run ended, once it has. */
  protected ended: RunEnd | undefined;
  private readonly sender: BackgroundSender;
  private skipped: number[] = [];
  private total = 0;

  protected constructor(
    /** The service's name in messages (`MLflow`). */
    private readonly service: string,
    /** The state file in the run folder. */
    private readonly statePath: string,
    protected state: State,
    protected readonly start: RunStart,
    private readonly flushTimeoutMs: number,
  ) {
    this.sender = new BackgroundSender(
      () => this.send(),
      (error, first) => {
        if (first)
          start.warn(
            `the ${service} logger could not send to ${this.where} (${error instanceof Error ? error.message : String(error)}); it keeps the steps and sends them once the server answers (the end of the run says if any could not be sent)`,
          );
      },
    );
  }

  /** Starts sending (the remote run first), with the steps a resume keeps that an earlier session could not send. */
  protected begin(): void {
    for (const row of this.start.earlierRows) if (row.step > this.state.sent_through) this.enqueue(row);
    this.sender.kick();
  }

  /** The server, in messages. */
  protected abstract get where(): string;

  /**
   * Sends what is pending (creating the remote run first, when needed), acknowledging rows with
   * {@link RemoteLogger.acknowledge}, and, once {@link RemoteLogger.ended} is set and the queue is
   * empty, the run's end; throws when a request fails.
   */
  protected abstract send(): Promise<void>;

  /**
   * The state file of `name` in `start`'s run folder for a resume, else undefined (a fresh run's
   * old file is deleted: its remote run is not this one).
   */
  protected static async readState<S>(start: RunStart, name: string): Promise<S | undefined> {
    const path = join(start.outputDir, name);
    if (!start.resumed) {
      await rm(path, { force: true });
      return undefined;
    }
    try {
      return JSON.parse(await readFile(path, "utf8")) as S;
    } catch {
      return undefined;
    }
  }

  /** Queues the row of a step; a step the server already has from an earlier session is not sent again. */
  async step(row: MetricsRow): Promise<void> {
    if (row.step <= this.state.sent_through) this.skipped.push(row.step);
    else {
      this.enqueue(row);
      this.sender.kick();
    }
    return Promise.resolve();
  }

  /** Sends what is left and the run's end, waiting at most the flush timeout; says what could not be sent. */
  async end(end: RunEnd): Promise<void> {
    this.ended = end;
    const done = await this.sender.finish(this.flushTimeoutMs);
    const { warn } = this.start;
    if (this.skipped.length > 0)
      warn(
        `the ${this.service} logger did not send steps ${this.skipped[0]}–${this.skipped.at(-1)} again: an earlier session had sent them, after the checkpoint this session resumed from, so ${this.where} keeps that session's values of them (metrics.jsonl has this session's)`,
      );
    if (done) return;
    const unsent = this.queue.length;
    warn(
      unsent > 0
        ? `the ${this.service} logger could not send ${unsent} of the ${this.total} steps of this session to ${this.where} within ${this.flushTimeoutMs / 1000} s (steps ${this.queue[0]!.row.step}–${this.queue.at(-1)!.row.step}); metrics.jsonl has them, and a resume (resume.mode=auto) sends them`
        : `the ${this.service} logger sent every step to ${this.where} but could not record the end of the run there within ${this.flushTimeoutMs / 1000} s`,
    );
  }

  /** Records a request that succeeded: a later failure is retried after the shortest delay again. */
  protected progressed(): void {
    this.sender.succeeded();
  }

  /** Marks the `count` oldest queued rows as taken by the server, and records it in the state file. */
  protected async acknowledge(count: number): Promise<void> {
    const sent = this.queue.splice(0, count);
    if (sent.length > 0) this.state.sent_through = sent.at(-1)!.row.step;
    await this.saveState();
  }

  /** Writes the state file (whole, through a temporary file). */
  protected async saveState(): Promise<void> {
    await writeFile(`${this.statePath}.tmp`, `${JSON.stringify(this.state, null, 1)}\n`);
    await rename(`${this.statePath}.tmp`, this.statePath);
  }

  private enqueue(row: MetricsRow): void {
    this.total += 1;
    this.queue.push({ row, time: Date.now() });
  }
}
