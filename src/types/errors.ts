/**
 * Base class of every error nexrl throws on purpose. Catch `NexrlError` to tell our errors
 * (bad recipe, bad trajectory, bad loss inputs, …) from bugs and from errors of other libraries.
 */
export class NexrlError extends Error {
  /** @param message what was wrong and how to fix it. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
