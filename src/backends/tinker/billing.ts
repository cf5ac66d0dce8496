/**
 * {@link BillingPause}: how a Tinker client waits out `402 Payment Required`, as the SDK's
 * `InternalClientHolder` does. A 402 pauses the call and retries it; the pause is one incident
 * from its first 402 until no 402 was seen for five minutes, and once an incident has lasted
 * longer than the server's `billing_exception_max_pause_duration_sec`, the next 402 fails the call.
 *
 * @module
 */

/** A 402 this long after the previous one starts a new incident. */
const INCIDENT_RESET_MS = 300_000;
/** At most one log line per this long. */
const LOG_INTERVAL_MS = 60_000;

/** Tracks one client's billing incidents. */
export class BillingPause {
  private firstAt: number | undefined;
  private lastAt: number | undefined;
  private loggedAt: number | undefined;

  /**
   * @param maxPauseMs the longest an incident is waited out (the server's flag, in milliseconds).
   * @param now the clock, in milliseconds.
   */
  constructor(
    private readonly maxPauseMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Called for a 402: true when the call should wait and retry, false when the incident has
   * lasted longer than the maximum. `log` receives a line at most once a minute.
   */
  shouldPause(serviceMessage: string, log: ((line: string) => void) | undefined): boolean {
    const now = this.now();
    if (this.lastAt !== undefined && now - this.lastAt > INCIDENT_RESET_MS) {
      this.firstAt = undefined;
      this.loggedAt = undefined;
    }
    this.lastAt = now;
    if (this.firstAt !== undefined && now - this.firstAt > this.maxPauseMs) return false;
    this.firstAt ??= now;
    if (this.loggedAt === undefined || now - this.loggedAt > LOG_INTERVAL_MS) {
      this.loggedAt = now;
      log?.(
        `nexrl tinker: the service paused this account for billing (${serviceMessage}); waiting up to ${Math.round(this.maxPauseMs / 1000)} s for it to be sorted out`,
      );
    }
    return true;
  }

  /** The longest an incident is waited out, in seconds. */
  get maxPauseSeconds(): number {
    return this.maxPauseMs / 1000;
  }

  /** How long the current incident has lasted, in milliseconds (0 when there is none). */
  get pausedMs(): number {
    return this.firstAt === undefined ? 0 : this.now() - this.firstAt;
  }
}
