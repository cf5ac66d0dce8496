/**
 * The sessions of the training protocols and their expiry. A client keeps its session alive with
 * heartbeats (Tinker's SDK sends one every 10 s, Weaver's every 30 s); a session that has had
 * neither a heartbeat nor a request for its models for the timeout, and has no operation
 * running, expires: its listeners unload what it owns, and requests naming it get 410.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { ProtocolError } from "../errors.js";

/** Options of {@link SessionTable}. */
export interface SessionTableOptions {
  /** Seconds without a heartbeat after which a session expires; 0: sessions never expire. */
  timeoutSeconds: number;
  /** Whether the session has operations running or queued (it does not expire meanwhile). */
  busy: (id: string) => boolean;
}

/** Default session timeout, in seconds: 30 of the Tinker SDK's heartbeats (every 10 s), 10 of Weaver's (every 30 s). */
export const DEFAULT_SESSION_TIMEOUT_SECONDS = 300;

/** How many expired ids are remembered, to answer 410 rather than 404. */
const EXPIRED_CAPACITY = 10_000;
/** Longest time between two looks for expired sessions. */
const MAX_SWEEP_MS = 5_000;

/** Live sessions with the time each was last heard from, and the ids of expired ones. */
export class SessionTable {
  private readonly lastSeen = new Map<string, number>();
  private readonly expired = new Set<string>();
  private readonly listeners: Array<(id: string) => void> = [];
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SessionTableOptions) {
    const { timeoutSeconds } = options;
    if (timeoutSeconds > 0) {
      this.timer = setInterval(() => this.sweep(), Math.min((timeoutSeconds * 1000) / 4, MAX_SWEEP_MS));
      this.timer.unref();
    }
  }

  /** What a session's expiry is, as messages say it: "expired after 300 s without a heartbeat". */
  get expiry(): string {
    return `expired after ${this.options.timeoutSeconds} s without a heartbeat`;
  }

  /** Calls `listener` with the id of each session that expires. */
  onExpire(listener: (id: string) => void): void {
    this.listeners.push(listener);
  }

  /** Opens a session and returns its id. */
  create(): string {
    const id = randomUUID();
    this.lastSeen.set(id, performance.now());
    return id;
  }

  /**
   * Checks that session `id` is live and counts this as hearing from it.
   * @param create how a client makes a session, for the message (`call create_session first`).
   * @throws {@link ProtocolError} 410 `session_expired` for an expired session, 404 `session_not_found` for an unknown one.
   */
  check(id: string, create: string): string {
    if (this.expired.has(id))
      throw new ProtocolError(
        `session "${id}" ${this.expiry} (nexrl serve --session-timeout) and its models were unloaded; ${create}, and keep sending heartbeats`,
        { status: 410, code: "session_expired" },
      );
    if (!this.lastSeen.has(id))
      throw new ProtocolError(`no session "${id}" on this server; ${create}`, {
        status: 404,
        code: "session_not_found",
      });
    this.lastSeen.set(id, performance.now());
    return id;
  }

  /** Counts activity of session `id` (a request for its models, an operation of its finishing) as hearing from it. */
  refresh(id: string): void {
    if (this.lastSeen.has(id)) this.lastSeen.set(id, performance.now());
  }

  /** `op`, counted as activity of session `owner` when it is submitted and when it finishes. */
  track<T extends { done: Promise<unknown> }>(owner: string, op: T): T {
    this.refresh(owner);
    void op.done.then(() => this.refresh(owner));
    return op;
  }

  /** Stops looking for expired sessions (when the server closes). */
  close(): void {
    clearInterval(this.timer);
  }

  private sweep(): void {
    const deadline = performance.now() - this.options.timeoutSeconds * 1000;
    for (const [id, seen] of this.lastSeen) {
      if (seen > deadline || this.options.busy(id)) continue;
      this.lastSeen.delete(id);
      this.expired.add(id);
      if (this.expired.size > EXPIRED_CAPACITY) this.expired.delete(this.expired.values().next().value!);
      for (const listener of this.listeners) listener(id);
    }
  }
}
