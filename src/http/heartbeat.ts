/**
 * {@link Heartbeat}: keeps a service session alive by calling it on an interval that never keeps
 * the process alive, and warns when beats have failed for too long.
 *
 * @module
 */

/** Options of {@link Heartbeat}. */
export interface HeartbeatOptions {
  /** Sends one heartbeat; a rejection counts as a missed beat. */
  beat: () => Promise<void>;
  /** Milliseconds between beats. */
  intervalMs: number;
  /** Warn once beats have failed for this long, in milliseconds (120 000). */
  warnAfterMs?: number;
  /** Receives the warnings (already free of secrets when `beat`'s errors are). */
  log?: (line: string) => void;
  /** Names the session in warnings, e.g. `Tinker session 1234`. */
  label: string;
}

/** A running heartbeat; {@link Heartbeat.stop} ends it. */
export class Heartbeat {
  private readonly timer: NodeJS.Timeout;
  private lastSuccess = Date.now();
  private inFlight = false;

  /** Starts beating every `options.intervalMs`. */
  constructor(private readonly options: HeartbeatOptions) {
    this.timer = setInterval(() => void this.tick(), options.intervalMs);
    this.timer.unref();
  }

  /** Stops the beats (idempotent). */
  stop(): void {
    clearInterval(this.timer);
  }

  private async tick(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      await this.options.beat();
      this.lastSuccess = Date.now();
    } catch (error) {
      const silentMs = Date.now() - this.lastSuccess;
      if (silentMs >= (this.options.warnAfterMs ?? 120_000)) {
        const reason = error instanceof Error ? error.message : String(error);
        this.options.log?.(
          `nexrl: ${this.options.label} has had no successful heartbeat for ${Math.round(silentMs / 1000)} s (${reason}); the service may end the session`,
        );
      }
    } finally {
      this.inFlight = false;
    }
  }
}
