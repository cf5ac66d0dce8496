/**
 * {@link PolicyVersion}: the one policy version a run's rollouts may use.
 * @module
 */

/**
 * The policy version rollouts may use: written by the training run (`release`, once a step's
 * weights are live), read by the rollout runners (`current`, stamped on rollouts that sampled nothing).
 */
export class PolicyVersion {
  /** @param released the version at the start (the resumed step, else 0). */
  constructor(private released: number) {}

  /** The version released last. */
  get current(): number {
    return this.released;
  }

  /** Makes `version` the one rollouts use. */
  release(version: number): void {
    this.released = version;
  }
}
