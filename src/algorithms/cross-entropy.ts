/**
 * The `remote_api_cross_entropy` trainer: supervised fine-tuning.
 * @module
 */
import type { Trajectory } from "../contracts/trajectory.js";
import { BaseTrainer } from "./base-trainer.js";
import type { TrainerContext } from "../contracts/trainer.js";

/** Options of {@link CrossEntropyTrainer}. */
export interface CrossEntropyTrainerOptions {
  /** `sum` (default): every trained token weighs 1; `mean`: each datum's weights sum to 1 (a per-sequence mean). */
  reduction?: "sum" | "mean";
}

/**
 * Supervised fine-tuning with `cross_entropy`: each trajectory trains on its loss-mask tokens
 * with `weights` = the shifted loss mask. No logprobs or advantages are needed.
 */
export class CrossEntropyTrainer extends BaseTrainer {
  private readonly reduction: "sum" | "mean";

  /**
   * @param context services, recipe and tokenizer.
   * @param options the per-datum reduction.
   */
  constructor(context: TrainerContext, options: CrossEntropyTrainerOptions = {}) {
    super(context);
    this.reduction = options.reduction ?? "sum";
  }

  /** Trains on the trajectories as they are. */
  protected prepareTrajectories(trajectories: Trajectory[]): Trajectory[] {
    return trajectories;
  }

  /** The configured reduction. */
  protected override supervisedReduction(): "sum" | "mean" {
    return this.reduction;
  }
}
