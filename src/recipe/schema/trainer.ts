/**
 * `trainer:` and the optimisation hyper-parameters (inventory §2.7). NexRL reads the
 * hyper-parameters from `service.train_service.config`; nexrl also accepts them under
 * `trainer.algorithm` and merges both into `trainer.algorithm` of the parsed recipe.
 * @module
 */
import { z } from "zod";
import { LOSS_FUNCTION_NAMES, type LossFunctionName } from "../../contracts/losses.js";
import type { AdamParamsWire } from "../../wire/wire.js";
import { nonEmpty, nonNegativeInt, positiveInt, refuse, SELF_HOSTED_WEIGHTS } from "./common.js";

/** Built-in trainer types, plus `custom` for a user class. */
export const TRAINER_TYPES = [
  "remote_api_cross_entropy",
  "remote_api_grpo",
  "remote_api_opd",
  "remote_api_dpo",
  "remote_api_reward_model",
  "custom",
] as const;

/** The trainers that learn from chosen/rejected pairs through a custom loss. */
export const PREFERENCE_TRAINER_TYPES: readonly string[] = ["remote_api_dpo", "remote_api_reward_model"];

/** The built-in trainers that train a policy loss on advantages (a supervised loss would ignore them). */
export const ADVANTAGE_TRAINER_TYPES: readonly string[] = ["remote_api_grpo", "remote_api_opd"];

/** The built-in trainers whose advantages are relative to the other rollouts of a task's group. */
export const GROUP_RELATIVE_TRAINER_TYPES: readonly string[] = ["remote_api_grpo"];

/** Optimisation keys accepted in `service.train_service.config` and `trainer.algorithm`; all optional. */
export const hyperParametersSchema = z.strictObject({
  /** Loss sent as `loss_fn` (default: `cross_entropy` for `remote_api_cross_entropy` and the preference trainers `remote_api_dpo` and `remote_api_reward_model`, which accept no other, else `importance_sampling`). */
  loss_fn: z.enum(LOSS_FUNCTION_NAMES as [LossFunctionName, ...LossFunctionName[]]).optional(),
  /** Extra `loss_fn_config` entries (e.g. PPO clip thresholds). */
  loss_fn_config: z.record(z.string(), z.number()).optional(),
  /** AdamW step size. */
  learning_rate: z.number().min(0).optional(),
  /** AdamW first-moment decay, in [0, 1). */
  beta1: z.number().min(0).lt(1).optional(),
  /** AdamW second-moment decay, in [0, 1). */
  beta2: z.number().min(0).lt(1).optional(),
  /** AdamW epsilon. */
  eps: z.number().positive().optional(),
  /** Decoupled weight decay. */
  weight_decay: z.number().min(0).optional(),
  /** Global-norm gradient clipping; 0 disables it. */
  grad_clip_norm: z.number().min(0).optional(),
  /** Entropy bonus sent in `loss_fn_config` where the service supports it. */
  entropy_coeff: z.number().optional(),
  /** On-policy distillation: weight of the reverse KL in the advantages (read by `remote_api_opd` and custom trainers only). */
  kl_penalty_coef: z.number().optional(),
  /** On-policy distillation: discount of future per-token advantages, in [0, 1] (read by `remote_api_opd` and custom trainers only). */
  kl_discount_factor: z.number().min(0).max(1).optional(),
});

/** Input shape of the hyper-parameters (every key optional). */
export type HyperParametersInput = z.input<typeof hyperParametersSchema>;

/**
 * The hyper-parameters of a parsed recipe, with defaults filled (`trainer.algorithm` of
 * `RecipeConfig`), spelled as in the recipe; trainers receive them in camelCase as
 * `AlgorithmConfig` (see `recipe/settings.ts`). The Adam keys are spelled as the wire's
 * `adam_params`.
 */
export interface RecipeAlgorithm extends AdamParamsWire {
  /** Loss sent as `loss_fn`. */
  loss_fn: LossFunctionName;
  /** Extra `loss_fn_config` entries. */
  loss_fn_config: Record<string, number>;
  /** Entropy bonus. */
  entropy_coeff: number;
  /** On-policy distillation: weight of the reverse KL. */
  kl_penalty_coef: number;
  /** On-policy distillation: discount of future advantages. */
  kl_discount_factor: number;
}

/** Defaults of {@link RecipeAlgorithm} except `loss_fn`, which depends on the trainer type. */
export const ALGORITHM_DEFAULTS: Readonly<Omit<RecipeAlgorithm, "loss_fn">> = Object.freeze({
  loss_fn_config: {},
  learning_rate: 1e-4,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  weight_decay: 0.01,
  grad_clip_norm: 1.0,
  entropy_coeff: 0,
  kl_penalty_coef: 1.0,
  kl_discount_factor: 0,
});

/** One teacher of `remote_api_opd`. */
const teacherSchema = z.strictObject({
  /** Teacher base model. */
  base_model: nonEmpty,
  /** Teacher weights (a sampler path); null for the base model. */
  checkpoint: z.string().nullable().optional(),
  /** NexRL's teacher on another service: not supported yet, refused when set. */
  base_url: z.string().nullable().optional(),
  /** API key of that service: refused when set, as `base_url` is. */
  api_key: z.string().nullable().optional(),
  /** Backend of the teacher's service: only the student's is supported. */
  backend: z.enum(["local", "tinker", "weaver"]).optional(),
});

/** Options of `remote_api_dpo`. */
const dpoSchema = z.strictObject({
  /** β: how far the policy may move from the reference; the margin is β × the difference of log-ratios. */
  beta: z.number().positive().default(0.1),
  /**
   * Sampler path of the reference model whose logprobs DPO measures the policy against; null (the
   * default) for the weights training started from (a frozen copy of the initial weights).
   */
  reference: nonEmpty.nullable().default(null),
});

/** Shape of `trainer:`. */
export const trainerSchema = z
  .strictObject({
    /** Which trainer turns trajectories into training steps; `custom` loads `custom_trainer_class_name` from `custom_trainer_module_path`. */
    type: z.enum(TRAINER_TYPES),
    /** Training steps to run. */
    total_train_steps: positiveInt,
    /** Save a checkpoint every this many steps; 0 only at the end (see `save_final`). */
    save_freq: nonNegativeInt.default(0),
    /** Save a checkpoint of the last step when the run ends (completed, out of data, or stopped); false for none but those of `save_freq` (which saves the last step too); a stopped run saves one either way. */
    save_final: z.boolean().default(true),
    /** Where checkpoints go. */
    checkpoint_path: nonEmpty.optional(),
    /** NexRL's self-hosted weight path: only `""` is accepted. */
    sync_weight_path: z.string().optional(),
    /** Delete the previous checkpoint after saving a new one, and the sampler snapshots of the local engine that no checkpoint records. */
    remove_previous_ckpt: z.boolean().default(false),
    /** File of a user trainer class; read only when `type` is `custom`. */
    custom_trainer_module_path: nonEmpty.optional(),
    /** Exported class name in `custom_trainer_module_path`. */
    custom_trainer_class_name: nonEmpty.default("CustomTrainer"),
    /**
     * Options of a custom trainer (`type: custom`), given to it as `this.options`, checked by the
     * class's `optionsSchema` when it has one; refused for the built-in trainers.
     */
    options: z.record(z.string(), z.unknown()).optional(),
    /** The teacher of `remote_api_opd`: one, on the student's training service. */
    teachers: z.array(teacherSchema).optional(),
    /** Options of `remote_api_dpo` (β and the reference model); refused for other trainers. */
    dpo: dpoSchema.optional(),
    /**
     * `remote_api_grpo` and `remote_api_opd` only: train with a loss that reads no advantages
     * (`cross_entropy`, plain likelihood of the model's own samples), which is refused without it.
     */
    allow_loss_without_advantages: z.boolean().default(false),
    /** Hyper-parameters; merged with `service.train_service.config` (null is NexRL's placeholder). */
    algorithm: hyperParametersSchema.nullable().optional(),
  })
  .superRefine((trainer, ctx) => {
    if (trainer.type === "custom" && trainer.custom_trainer_module_path === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["custom_trainer_module_path"],
        message: "required when `type` is `custom`: the file that exports your trainer class",
      });
    }
    const teachers = trainer.teachers ?? [];
    if (trainer.type === "remote_api_opd" && teachers.length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["teachers"],
        message: "required when `type` is `remote_api_opd`: e.g. `[{base_model: Qwen/Qwen3-32B}]`",
      });
    }
    if (trainer.type !== "remote_api_opd" && trainer.teachers !== undefined)
      refuse(
        ctx,
        ["teachers"],
        `read only by \`type: remote_api_opd\`, and this trainer is \`${trainer.type}\`; remove it`,
      );
    if (teachers.length > 1) refuse(ctx, ["teachers", 1], "on-policy distillation learns from one teacher; keep one");
    teachers.forEach((teacher, i) => {
      for (const key of ["base_url", "api_key"] as const)
        if (teacher[key])
          refuse(
            ctx,
            ["teachers", i, key],
            "a teacher on another service is not supported yet: the teacher samples on the student's training service; remove it",
          );
    });
    if (trainer.type !== "remote_api_dpo" && trainer.dpo !== undefined)
      refuse(ctx, ["dpo"], `read only by \`type: remote_api_dpo\`, and this trainer is \`${trainer.type}\`; remove it`);
    if (trainer.type !== "custom" && trainer.custom_trainer_module_path !== undefined)
      refuse(
        ctx,
        ["custom_trainer_module_path"],
        `read only when \`type\` is \`custom\`, and this trainer is \`${trainer.type}\`: remove it, or set \`type: custom\` to run your class`,
      );
    if (trainer.type !== "custom" && trainer.options !== undefined)
      refuse(
        ctx,
        ["options"],
        `read only by a custom trainer (\`type: custom\`), and this trainer is \`${trainer.type}\`; remove it (the built-in trainers' settings are keys of their own, e.g. \`algorithm\`, \`dpo\`)`,
      );
    if (trainer.allow_loss_without_advantages && !ADVANTAGE_TRAINER_TYPES.includes(trainer.type))
      refuse(
        ctx,
        ["allow_loss_without_advantages"],
        `read only by the trainers that learn from advantages (${ADVANTAGE_TRAINER_TYPES.join(", ")}), and this trainer is \`${trainer.type}\`; remove it`,
      );
    if (trainer.sync_weight_path) refuse(ctx, ["sync_weight_path"], SELF_HOSTED_WEIGHTS);
  });
