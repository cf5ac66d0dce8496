import { NexrlError } from "../errors.js";
/**
 * {@link SubmitOrder}: sends a client's requests one after another, in the order they were made,
 * as services that order operations by a sequence number expect.
 *
 * @module
 */

/**
 * Runs submissions strictly one after another. When one fails for good, the sequence has a hole
 * the service would wait on forever, so every later submission fails fast with a
 * {@link NexrlError} naming the first failure.
 */
export class SubmitOrder {
  private tail: Promise<unknown> = Promise.resolve();
  private broken: { what: string; error: unknown } | undefined;

  /**
   * Runs `send` once every earlier submission has finished.
   * @param what names the request in errors, e.g. `forward_backward seq_id 7`.
   */
  run<T>(what: string, send: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(() => {
      if (this.broken) {
        const reason = this.broken.error instanceof Error ? this.broken.error.message : String(this.broken.error);
        throw new NexrlError(
          `cannot submit ${what}: the earlier ${this.broken.what} could not be submitted (${reason}), and the service runs a model's operations strictly in order; create a new training client (and loadState from a checkpoint) to continue`,
        );
      }
      return send().catch((error: unknown) => {
        this.broken ??= { what, error };
        throw error;
      });
    });
    this.tail = turn.catch(() => undefined);
    return turn;
  }
}
