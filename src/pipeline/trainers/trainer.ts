/**
 * The trainer contract: what the training loop asks of a trainer, apart from
 * {@link RemoteApiTrainer}, the implementation every built-in algorithm uses.
 * @module
 */
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import type { TrainingClient, TrainingService } from "../../services/training/types.js";
import type { Tokenizer } from "../../types/tokenizer.js";
import type { Trajectory } from "../../types/trajectory.js";

/** What a trainer is constructed with. */
export interface TrainerContext {
  /** The whole parsed recipe; hyper-parameters are in `recipe.trainer.algorithm`. */
  readonly recipe: RecipeConfig;
  /** The training service (for samplers of reference or teacher models). */
  readonly service: TrainingService;
  /** The model being trained. */
  readonly trainingClient: TrainingClient;
  /** The tokenizer of the trained model. */
  readonly tokenizer: Tokenizer;
  /** Sampler path of the weights training started from (the reference policy of a KL penalty). */
  readonly initialSamplerPath: string;
  /** Reports a warning to the run's log and event stream. */
  warn(message: string): void;
}

/** What one call of {@link Trainer.train} did. */
export interface TrainStepResult {
  /** The trajectories after `prepareTrajectories` (with their advantages). */
  trajectories: Trajectory[];
  /** Datums sent to the service (0 when the step was skipped). */
  datums: number;
  /** Whether `forwardBackward` and `optimStep` ran. */
  stepped: boolean;
  /** Why the step trained nothing, when it did not step (see {@link RemoteApiTrainer.describeSkippedStep}). */
  skipReason?: string;
}

/**
 * What the training loop asks of a trainer: one training step on a batch of trajectories, and the
 * current weights exported for sampling. {@link RemoteApiTrainer} implements it over any training
 * service; subclass that to write an algorithm.
 */
export interface Trainer {
  /**
   * One training step on `trajectories`; adds the step's metrics to `metrics`.
   * @param trajectories the batch, as the rollouts produced it.
   * @param metrics the step's metrics row, to add to.
   */
  train(trajectories: Trajectory[], metrics: Record<string, number>): Promise<TrainStepResult>;
  /**
   * Exports the current weights for sampling under `name` and returns the sampler path.
   * @param name the snapshot's name, unique within the run.
   */
  saveSamplerWeights(name: string): Promise<string>;
}
