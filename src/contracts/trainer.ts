/**
 * The trainer contract: what the training loop asks of a trainer, apart from
 * {@link BaseTrainer}, the implementation every built-in algorithm uses.
 * @module
 */
import type { TrainingClient, TrainingService } from "./training.js";
import type { LossFunctionName } from "./losses.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import type { Trajectory } from "./trajectory.js";
import type { ClassOptions } from "./options.js";
import type { AdamParams } from "../wire/wire.js";

/**
 * The hyper-parameters every trainer receives, with defaults filled: the {@link AdamParams} of
 * each optimizer step plus the loss and its extras. Built from the recipe's `trainer.algorithm`
 * merged with `service.train_service.config`, where they are spelled in snake_case.
 */
export interface AlgorithmConfig extends AdamParams {
  /** Loss sent as `loss_fn` (recipe: `loss_fn`). */
  lossFn: LossFunctionName;
  /** Extra `loss_fn_config` entries, sent as they are (recipe: `loss_fn_config`). */
  lossFnConfig: Record<string, number>;
  /** Entropy bonus (recipe: `entropy_coeff`). */
  entropyCoeff: number;
  /** On-policy distillation: weight of the reverse KL (recipe: `kl_penalty_coef`). */
  klPenaltyCoef: number;
  /** On-policy distillation: discount of future advantages (recipe: `kl_discount_factor`). */
  klDiscountFactor: number;
}

/** The part of the recipe a trainer reads, camelCase, built by the pipeline from the parsed recipe. */
export interface TrainerSettings {
  /** The hyper-parameters. */
  readonly algorithm: AlgorithmConfig;
  /** The teacher of `remote_api_opd` (`trainer.teachers[0]`), served by the student's training service; undefined when the recipe names none. */
  readonly teacher:
    | {
        /** The teacher's base model (`base_model`). */
        readonly baseModel: string;
        /** The teacher's weights, a sampler path (`checkpoint`); undefined for the base model. */
        readonly checkpoint: string | undefined;
      }
    | undefined;
  /** Training steps of the run (`trainer.total_train_steps`). */
  readonly totalTrainSteps: number;
  /** Options of `remote_api_dpo` (`trainer.dpo`), defaults filled. */
  readonly dpo: {
    /** β, the strength of the pull towards the reference (`beta`). */
    readonly beta: number;
    /** Sampler path of the reference model (`reference`); undefined for the weights training started from. */
    readonly reference: string | undefined;
  };
}

/** What a trainer is constructed with. */
export interface TrainerContext {
  /** What the trainer reads of the recipe: the hyper-parameters and the teacher. */
  readonly settings: TrainerSettings;
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
  /** The recipe's `trainer.options`, checked by the class's `optionsSchema` when it has one; `{}` when the recipe gives none. */
  readonly options?: ClassOptions;
}

/** What one call of {@link Trainer.train} did. */
export interface TrainStepResult {
  /** The trajectories after `prepareTrajectories` (with their advantages). */
  trajectories: Trajectory[];
  /** Datums sent to the service (0 when the step was skipped). */
  datums: number;
  /** Whether `forwardBackward` and `optimStep` ran. */
  stepped: boolean;
  /** Why the step trained nothing, when it did not step (see {@link BaseTrainer.describeSkippedStep}). */
  skipReason?: string;
}

/**
 * What the training loop asks of a trainer: one training step on a batch of trajectories, and the
 * current weights exported for sampling. {@link BaseTrainer} implements it over any training
 * service; subclass that to write an algorithm, or implement this interface in a class of your
 * own (constructed with a {@link TrainerContext}), which `trainer.type: custom` loads as well.
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
