/**
 * {@link Slots}: a counting semaphore, for the server's cap on sampling requests in flight per
 * sampling client (`sample_max_concurrent_requests`).
 *
 * @module
 */

/** At most `size` holders at once; the others wait, first come first served. */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  /** @param size how many may hold a slot at once (at least 1). */
  constructor(private readonly size: number) {}

  /** Resolves once the caller holds a slot; give it back with {@link Slots.release}. */
  acquire(): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Gives a slot back; the longest waiter takes it. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}
