/**
 * A one-shot-per-change signal for loops that wait until "something changed".
 * @module
 */

/** Wakes every waiter on {@link Notifier.notify}; waiters then re-check their condition. */
export class Notifier {
  private waiters: Array<() => void> = [];

  /** Resolves at the next {@link Notifier.notify}, or when `signal` aborts. */
  changed(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const done = (): void => {
        signal?.removeEventListener("abort", done);
        resolve();
      };
      this.waiters.push(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Wakes every current waiter. */
  notify(): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
