/**
 * The whole recipe: sections, cross-section rules (inventory §8 `validate_config`, with NexRL's
 * bugs fixed), and the normalised output.
 * @module
 */
import { z } from "zod";
import { lossFunctions, type LossFunctionName } from "../../contracts/losses.js";
import { dataSchema, validateSchema } from "./data.js";
import { POOL_GROUPING, rolloutWorkerSchema, trajectoryPoolSchema } from "./rollout-worker.js";
import {
  accountingSchema,
  environmentSchema,
  initSchema,
  loggerSchema,
  resumeSchema,
  runtimeMonitorSchema,
} from "./run.js";
import { nonEmpty, within } from "./common.js";
import {
  checkInferenceService,
  DEFAULT_LOCAL_MODEL,
  inferenceServiceSchema,
  localServiceSchema,
  tinkerServiceSchema,
  trainServiceSchema,
  weaverServiceSchema,
  weightSchema,
} from "./service.js";
import {
  ADVANTAGE_TRAINER_TYPES,
  ALGORITHM_DEFAULTS,
  GROUP_RELATIVE_TRAINER_TYPES,
  PREFERENCE_TRAINER_TYPES,
  trainerSchema,
  type HyperParametersInput,
  type RecipeAlgorithm,
} from "./trainer.js";

/** Shape of `service:`. */
export const serviceSchema = z
  .strictObject({
    /** The training service (one actor). */
    train_service: trainServiceSchema,
    /** The sampler the rollout workers call. */
    inference_service: inferenceServiceSchema.prefault({}),
    /** Threads and kernels of the embedded engine (only with the `local` backend). */
    local_service: localServiceSchema.optional(),
    /** Tinker connection (required when a backend is `tinker`). */
    tinker_service: tinkerServiceSchema.optional(),
    /** Weaver connection (required when a backend is `weaver`). */
    weaver_service: weaverServiceSchema.optional(),
  })
  .superRefine((service, ctx) => {
    const train = service.train_service;
    const inference = service.inference_service;
    if (train.model === undefined && inference.model === undefined && train.backend !== "local") {
      ctx.addIssue({
        code: "custom",
        path: ["train_service", "model"],
        message: `required for the ${train.backend} backend: the base model to train, e.g. Qwen/Qwen3-8B (or set \`service.inference_service.model\`); only \`backend: local\` has a default model (the \`${DEFAULT_LOCAL_MODEL}\` preset)`,
      });
    }
    if (inference.identifier !== train.identifier) {
      ctx.addIssue({
        code: "custom",
        path: ["inference_service", "identifier"],
        message: `must equal \`service.train_service.identifier\` ("${train.identifier}"), which routes trajectories and weight syncs`,
      });
    }
    if (train.wire !== undefined && train.backend !== "tinker") {
      ctx.addIssue({
        code: "custom",
        path: ["train_service", "wire"],
        message: `only the tinker backend has wire generations; remove it for the ${train.backend} backend`,
      });
    }
    const sampler = inference.backend ?? train.backend;
    if ((sampler === "local" || sampler === "tinker" || sampler === "weaver") && sampler !== train.backend) {
      ctx.addIssue({
        code: "custom",
        path: ["inference_service", "backend"],
        message: `the ${sampler} sampler cannot serve weights trained on ${train.backend}; use "${train.backend}" or an OpenAI-compatible server`,
      });
    }
    if ((sampler === "openai" || sampler === "vllm" || sampler === "sglang") && !inference.base_url) {
      ctx.addIssue({
        code: "custom",
        path: ["inference_service", "base_url"],
        message: `required when \`backend\` is \`${sampler}\`: the server's base URL`,
      });
    }
    if (service.local_service !== undefined && train.backend !== "local") {
      ctx.addIssue({
        code: "custom",
        path: ["local_service"],
        message: `applies only to \`train_service.backend: local\` (the embedded engine), not ${train.backend}; remove it`,
      });
    }
    checkInferenceService(inference, sampler, within(ctx, "inference_service"));
    for (const backend of new Set([train.backend, sampler])) {
      if (backend !== "tinker" && backend !== "weaver") continue;
      const section = `${backend}_service` as const;
      const variable = `${backend.toUpperCase()}_API_KEY`;
      if (!service[section]?.api_key) {
        ctx.addIssue({
          code: "custom",
          path: service[section] === undefined ? [section] : [section, "api_key"],
          message: `required for the ${backend} backend: set \`${section}.api_key: \${oc.env:${variable}}\``,
        });
      }
    }
  })
  .transform((service) => {
    const train = service.train_service;
    const model = train.model ?? service.inference_service.model ?? DEFAULT_LOCAL_MODEL;
    return {
      ...service,
      /** The training service (one actor). */
      train_service: {
        ...train,
        /** Base model to train (from `inference_service.model` when not set here, else for `local` the `small` preset). */
        model,
      },
      /** The sampler the rollout workers call. */
      inference_service: {
        ...service.inference_service,
        /** Model to sample from (the trained model unless set). */
        model: service.inference_service.model ?? model,
        /** Where sampling runs (the training backend's sampler unless set). */
        backend: service.inference_service.backend ?? train.backend,
      },
    };
  });

/** Hyper-parameter keys, for merging. */
const HYPER_KEYS = ["loss_fn", ...Object.keys(ALGORITHM_DEFAULTS)] as (keyof RecipeAlgorithm)[];

/** The recipe schema: parses what a user writes ({@link RecipeInput}) into {@link RecipeConfig}. */
export const recipeSchema = z
  .strictObject({
    /** Project name (metrics, checkpoint folders). */
    project_name: nonEmpty.default("nexrl"),
    /** Run name within the project. */
    experiment_name: nonEmpty.default("default"),
    /** Where the pipeline runs: in this process. */
    launch_mode: z.enum(["local"]).default("local"),
    /** NexRL's multi-model flag: only `false` is accepted (nexrl trains one model per run). */
    multi_model: z.union([z.boolean(), z.string()]).optional(),
    /** Metrics sinks. */
    logger: loggerSchema,
    /** Token prices, for the estimated cost of each step and of the run. */
    accounting: accountingSchema,
    /** NexRL's pod setup script: only its empty values are accepted. */
    environment: environmentSchema.optional(),
    /** Resume from a checkpoint. */
    resume: resumeSchema,
    /** Start a fresh run from the weights of another recipe's run or of a checkpoint (a warm start); null for none (`init=null` on the command line). */
    init: initSchema.nullable().optional(),
    /** Training tasks. */
    data: dataSchema,
    /** Validation. */
    validate: validateSchema.prefault({}),
    /** Rollouts. */
    rollout_worker: rolloutWorkerSchema,
    /** Batching of trajectories. */
    trajectory_pool: trajectoryPoolSchema,
    /** Training. */
    trainer: trainerSchema,
    /** Weight synchronisation. */
    weight: weightSchema,
    /** Services. */
    service: serviceSchema,
    /** Failure policy and progress reporting. */
    runtime_monitor: runtimeMonitorSchema,
  })
  .superRefine((recipe, ctx) => {
    const issue = (path: (string | number)[], message: string): void => ctx.addIssue({ code: "custom", path, message });
    const { data, rollout_worker: worker, trajectory_pool: pool, weight, service } = recipe;
    const waitsForSync = weight.sync_mode !== "fully-async";
    if (data.keep_batch_order !== waitsForSync) {
      issue(
        ["data", "keep_batch_order"],
        `must be ${waitsForSync} when \`weight.sync_mode\` is \`${weight.sync_mode}\``,
      );
    }
    const finishesLoadedBatch = pool.check_batch_ready_function !== "batch_size_reached";
    if (finishesLoadedBatch !== waitsForSync) {
      issue(
        ["trajectory_pool", "check_batch_ready_function"],
        waitsForSync
          ? `\`batch_size_reached\` cannot be used when \`weight.sync_mode\` is \`${weight.sync_mode}\`; use \`loaded_batch_finished\``
          : "must be `batch_size_reached` when `weight.sync_mode` is `fully-async`",
      );
    }
    const responseLength = worker.max_response_length;
    const hint = `(${responseLength}); write \`\${rollout_worker.max_response_length}\``;
    if (data.max_response_length !== undefined && data.max_response_length !== responseLength) {
      issue(["data", "max_response_length"], `must equal \`rollout_worker.max_response_length\` ${hint}`);
    }
    if (service.inference_service.max_tokens !== undefined && service.inference_service.max_tokens !== responseLength) {
      issue(
        ["service", "inference_service", "max_tokens"],
        `must equal \`rollout_worker.max_response_length\` ${hint}`,
      );
    }
    if (worker.judge?.mode === "group_rank") {
      // Each rollout waits for the others of its group before the judge ranks them all.
      const groupSize = Math.max(data.rollout_repeat_n, recipe.validate.data?.rollout_repeat_n ?? 1);
      if (worker.num_workers < groupSize) {
        issue(
          ["rollout_worker", "num_workers"],
          `must be at least the group size (${groupSize}, the largest rollout_repeat_n) with \`judge.mode: group_rank\`: the judge ranks a group once all its rollouts have answered`,
        );
      }
    }
    const needed = (worker.max_prompt_length ?? data.max_prompt_length) + responseLength;
    if (worker.max_sequence_length !== undefined && worker.max_sequence_length < needed) {
      issue(
        ["rollout_worker", "max_sequence_length"],
        `must be at least the prompt length plus \`max_response_length\` (${needed})`,
      );
    }
    if (weight.validate_freq !== undefined && weight.validate_freq !== recipe.validate.eval.validate_freq) {
      issue(
        ["weight", "validate_freq"],
        `must equal \`validate.eval.validate_freq\` (${recipe.validate.eval.validate_freq}); write \`\${validate.eval.validate_freq}\` or drop it`,
      );
    }
    if (recipe.init != null && recipe.resume.mode === "from_path")
      issue(
        ["init"],
        "`init` and `resume.mode: from_path` both choose the weights the run starts from; keep one (`init.from_checkpoint` warm-starts from a checkpoint's weights)",
      );
    const multiModel = recipe.multi_model;
    if (multiModel === true || (typeof multiModel === "string" && !["false", ""].includes(multiModel.toLowerCase())))
      issue(["multi_model"], "nexrl trains one model per run; remove it (or set false)");
    const validation = recipe.validate.data;
    if (validation?.max_response_length !== undefined && validation.max_response_length !== responseLength) {
      issue(["validate", "data", "max_response_length"], `must equal \`rollout_worker.max_response_length\` ${hint}`);
    }
    const tokenizer = worker.tokenizer || service.inference_service.tokenizer || data.tokenizer_path;
    if (validation?.tokenizer_path && validation.tokenizer_path !== tokenizer) {
      issue(
        ["validate", "data", "tokenizer_path"],
        `validation measures prompts with the run's tokenizer (${tokenizer ? `\`${tokenizer}\`, ` : ""}from rollout_worker.tokenizer, service.inference_service.tokenizer, data.tokenizer_path or the model); remove it`,
      );
    }
    const backend = service.train_service.backend;
    if (weight.sync_method !== undefined && weight.sync_method !== backend) {
      issue(["weight", "sync_method"], `must be "${backend}" (the training backend) or left out`);
    }
    const fromService: HyperParametersInput = service.train_service.config ?? {};
    const fromTrainer: HyperParametersInput = recipe.trainer.algorithm ?? {};
    for (const key of HYPER_KEYS) {
      const a = fromService[key];
      const b = fromTrainer[key];
      if (a !== undefined && b !== undefined && JSON.stringify(a) !== JSON.stringify(b)) {
        issue(
          ["trainer", "algorithm", key],
          `conflicts with \`service.train_service.config.${key}\` (${JSON.stringify(a)}); set it in one place`,
        );
      }
    }
    (recipe.trainer.teachers ?? []).forEach((teacher, i) => {
      if (teacher.backend !== undefined && teacher.backend !== backend)
        issue(
          ["trainer", "teachers", i, "backend"],
          `a teacher on another service is not supported yet: the teacher samples on the student's ${backend} service; remove it`,
        );
    });
    const trainerType = recipe.trainer.type;
    for (const key of ["kl_penalty_coef", "kl_discount_factor"] as const) {
      if (trainerType === "remote_api_opd" || trainerType === "custom") continue;
      if (fromTrainer[key] === undefined && fromService[key] === undefined) continue;
      issue(
        fromTrainer[key] === undefined ? ["service", "train_service", "config", key] : ["trainer", "algorithm", key],
        `read only by remote_api_opd (the weight and discount of its reverse KL to the teacher), and this trainer is ${trainerType}; remove it${trainerType === "remote_api_grpo" ? " (a KL penalty to the initial weights is GrpoTrainer's klPenalty option, in a custom trainer)" : ""}`,
      );
    }
    if (PREFERENCE_TRAINER_TYPES.includes(trainerType)) {
      for (const key of ["loss_fn", "loss_fn_config", "entropy_coeff"] as const) {
        const value = fromTrainer[key] ?? fromService[key];
        if (value === undefined || value === "cross_entropy" || value === 0) continue;
        issue(
          fromTrainer[key] === undefined ? ["service", "train_service", "config", key] : ["trainer", "algorithm", key],
          `${trainerType} trains with its own pairwise loss (sent through forwardBackwardCustom as \`cross_entropy\`), so ${key} would not be used; remove it`,
        );
      }
    }
    const entropy = fromTrainer.entropy_coeff ?? fromService.entropy_coeff;
    if (entropy !== undefined && entropy !== 0 && backend !== "weaver") {
      issue(
        fromTrainer.entropy_coeff === undefined
          ? ["service", "train_service", "config", "entropy_coeff"]
          : ["trainer", "algorithm", "entropy_coeff"],
        `the ${backend} backend has no entropy bonus (only weaver has one); remove it (or set 0)`,
      );
    }
    const lossFn = fromTrainer.loss_fn ?? fromService.loss_fn;
    const lossPath =
      fromTrainer.loss_fn === undefined
        ? ["service", "train_service", "config", "loss_fn"]
        : ["trainer", "algorithm", "loss_fn"];
    if (GROUP_RELATIVE_TRAINER_TYPES.includes(trainerType) && data.rollout_repeat_n < 2)
      issue(
        ["data", "rollout_repeat_n"],
        `is ${data.rollout_repeat_n}, and \`${trainerType}\` compares each rollout with the other rollouts of its task: in a group of one, every advantage is 0 and nothing is learned; set it to 2 or more (e.g. 4 or 8)`,
      );
    if (
      lossFn !== undefined &&
      ADVANTAGE_TRAINER_TYPES.includes(trainerType) &&
      "weights" in lossFunctions[lossFn].inputs &&
      !recipe.trainer.allow_loss_without_advantages
    )
      issue(
        lossPath,
        `\`${lossFn}\` reads no advantages, so \`${trainerType}\` would train plain likelihood of the model's own samples whatever their reward; use a policy loss (importance_sampling, ppo, cispo, dro), \`trainer.type: remote_api_cross_entropy\` for supervised fine-tuning, or set \`trainer.allow_loss_without_advantages: true\` if that is what you want`,
      );
    if (pool.group_size !== 1 && pool.group_size !== data.rollout_repeat_n)
      issue(
        ["trajectory_pool", "group_size"],
        `is ${pool.group_size}, and data.rollout_repeat_n is ${data.rollout_repeat_n}: ${POOL_GROUPING}; set it to ${data.rollout_repeat_n} (or 1, or remove it)`,
      );
    if (lossFn !== undefined && !(lossFunctions[lossFn].backends as readonly string[]).includes(backend)) {
      issue(
        lossPath,
        `\`${lossFn}\` is not available on ${backend} (available on: ${lossFunctions[lossFn].backends.join(", ")})`,
      );
    }
  })
  .transform(({ service, ...recipe }) => {
    const { config, ...train } = service.train_service;
    const supervised =
      recipe.trainer.type === "remote_api_cross_entropy" || PREFERENCE_TRAINER_TYPES.includes(recipe.trainer.type);
    const defaultLoss = supervised ? "cross_entropy" : "importance_sampling";
    // Spread into an anonymous type: the parsed recipe documents its keys inline, as YAML spells them.
    const algorithm = {
      /** Loss sent as `loss_fn`. */
      loss_fn: defaultLoss as LossFunctionName,
      ...ALGORITHM_DEFAULTS,
    };
    for (const source of [config ?? {}, recipe.trainer.algorithm ?? {}]) {
      for (const [key, value] of Object.entries(source))
        if (value !== undefined) Object.assign(algorithm, { [key]: value });
    }
    return {
      ...recipe,
      /** Training. */
      trainer: {
        ...recipe.trainer,
        /** Hyper-parameters: defaults, then `service.train_service.config`, then `trainer.algorithm`. */
        algorithm,
      },
      /** Services. */
      service: {
        ...service,
        /** The training service; its `config` was merged into `trainer.algorithm`. */
        train_service: train,
      },
    };
  });

/**
 * A parsed recipe: every default filled, hyper-parameters merged into `trainer.algorithm`. Its keys
 * are the YAML keys (snake_case); each is documented where the schema defines it
 * (`src/recipe/schema/`), and editors show those comments on hover.
 */
export type RecipeConfig = z.output<typeof recipeSchema>;

/**
 * The `rollout_worker:` section of a parsed recipe, as the recipe spells it (snake_case). Workers
 * read `WorkerSettings` instead.
 */
export type RolloutWorkerConfig = RecipeConfig["rollout_worker"];
