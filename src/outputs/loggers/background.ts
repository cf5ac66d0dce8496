/**
 * {@link BackgroundSender}: runs a remote logger's sending beside the run, so that a slow or
 * unreachable server never holds up a step.
 * @module
 * @internal
 */

/** Delays between failed attempts: doubling from half a second up to half a minute. */
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 30_000;

/**
 * Calls `work` (which sends everything its logger holds, and throws when a request fails) each
 * time there is something new, one call at a time; after a failure, again after a doubling delay
 * until it succeeds. The first failure is reported through `warn`, once.
 */
export class BackgroundSender {
  private running: Promise<void> | undefined;
  /** Set when something arrived while `work` was running: it runs once more. */
  private again = false;
  private failures = 0;
  private warned = false;
  private stopped = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly work: () => Promise<void>,
    private readonly onFailure: (error: unknown, first: boolean) => void,
  ) {}

  /** Called by `work` after each request that succeeds: the next failure waits the shortest delay again. */
  succeeded(): void {
    this.failures = 0;
  }

  /** Starts `work` unless it is running (it then runs once more when done). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pump().finally(() => (this.running = undefined));
  }

  /**
   * Sends what is left: retries at once, then with the usual delays, until `work` succeeds with
   * nothing new or `timeoutMs` has passed; then stops for good. Returns whether everything was sent.
   */
  async finish(timeoutMs: number): Promise<boolean> {
    this.kick();
    this.wake?.();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), timeoutMs)));
    try {
      while (this.running) {
        if ((await Promise.race([this.running, deadline])) === "late") break;
      }
    } finally {
      clearTimeout(timer);
      this.stopped = true;
      this.wake?.();
    }
    return !this.running && this.failures === 0;
  }

  private async pump(): Promise<void> {
    for (;;) {
      this.again = false;
      try {
        await this.work();
        this.failures = 0;
        if (!this.again) return;
      } catch (error) {
        this.failures += 1;
        this.onFailure(error, !this.warned);
        this.warned = true;
        if (this.stopped) return;
        await this.sleep(Math.min(FIRST_DELAY_MS * 2 ** (this.failures - 1), MAX_DELAY_MS));
        if (this.stopped) return;
      }
    }
  }

  /** Waits `ms`, or less when {@link BackgroundSender.finish} wakes it. The timer keeps no process alive. */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      this.wake = done;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
    });
  }
}
