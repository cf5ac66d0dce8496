/**
 * {@link WeightSync}: points the rollouts' sampler at new weights as soon as the trainer has
 * exported them.
 * @module
 */
import type { TrainingService } from "../contracts/training.js";
import type { SamplerInferenceClient } from "../inference/sampler-inference.js";

/** Where the sampler stands. */
export interface SamplerState {
  /** Path of the weights the sampler serves. */
  path: string;
  /** The policy version (training step) of those weights. */
  version: number;
}

/**
 * Holds the sampler the rollouts use. {@link WeightSync.publish} opens a sampling client on a new
 * sampler path and swaps it into the inference client: calls already running finish on the old
 * weights, new calls use the new ones, and each result carries the version that produced it.
 */
export class WeightSync {
  private current: SamplerState;

  /**
   * @param service opens sampling clients on sampler paths.
   * @param inference the rollouts' inference client, when they sample through the training service.
   * @param initial the sampler the inference client starts with.
   */
  constructor(
    private readonly service: TrainingService,
    private readonly inference: SamplerInferenceClient | undefined,
    initial: SamplerState,
  ) {
    this.current = initial;
  }

  /** The sampler in use. */
  get sampler(): SamplerState {
    return this.current;
  }

  /** Opens a sampler on `path` (the weights of `version`) and makes new rollouts use it. */
  async publish(path: string, version: number): Promise<void> {
    const client = await this.service.createSamplingClient(path);
    this.inference?.setSampler(client, version);
    this.current = { path, version };
  }
}
