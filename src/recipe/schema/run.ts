/**
 * Run-level sections: `logger:`, `accounting:`, `resume:`, `environment:`, `runtime_monitor:` (inventory §7).
 * @module
 */
import { z } from "zod";
import { didYouMean } from "../suggest.js";
import { nonEmpty, positiveInt, refuse } from "./common.js";

/** Metrics sinks `logger.backend` accepts. */
export const LOGGER_BACKENDS = ["console", "jsonl", "tensorboard", "mlflow", "wandb"] as const;

/** Loggers NexRL recipes name that nexrl does not implement, and why. */
const UNSUPPORTED_LOGGERS: Readonly<Record<string, string>> = {
  swanlab: "nexrl has no SwanLab client",
};

/** An `http://` or `https://` URL. */
const httpUrl = z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" });

/** Seconds the end of a run waits for a remote logger to send what it still holds. */
const flushTimeout = z.number().positive().default(60);

/** Shape of `logger.mlflow:` (the `mlflow` logger's settings). */
const mlflowSchema = z.strictObject({
  /** The tracking server (`http://host:5000`); default: the environment variable `MLFLOW_TRACKING_URI`. */
  tracking_uri: httpUrl.optional(),
  /** The experiment the run goes into, created when missing (MLflow's own default experiment: `Default`). */
  experiment_name: nonEmpty.default("Default"),
  /** The MLflow run's name (default: the name of the run folder). */
  run_name: nonEmpty.optional(),
  /** Tags set on the MLflow run (at most 90, values cut at 5000 characters), besides the ones nexrl sets (`mlflow.source.name`, `nexrl.run_dir`, and at the end `nexrl.status` and `nexrl.summary`). */
  tags: z
    .record(nonEmpty, z.string())
    .refine(
      (tags) => Object.keys(tags).length <= 90,
      "at most 90 tags (MLflow takes 100 per request; nexrl sets its own)",
    )
    .default({}),
  /** Seconds the end of a run waits for the steps not yet sent (a server that is down). */
  flush_timeout_seconds: flushTimeout,
});

/** Shape of `logger.wandb:` (the `wandb` logger's settings). */
const wandbSchema = z.strictObject({
  /** The W&B project (default: the environment variable `WANDB_PROJECT`, else `uncategorized`). */
  project: nonEmpty.optional(),
  /** The W&B entity, a user or team (default: `WANDB_ENTITY`, else the API key's default entity). */
  entity: nonEmpty.optional(),
  /** The W&B run's display name (default: the name of the run folder). */
  run_name: nonEmpty.optional(),
  /** The run's group in the W&B UI. */
  group: nonEmpty.optional(),
  /** Tags of the W&B run. */
  tags: z.array(nonEmpty).default([]),
  /** The W&B server (default: `WANDB_BASE_URL`, else `https://api.wandb.ai`). */
  base_url: httpUrl.optional(),
  /** Seconds the end of a run waits for the steps not yet sent (a server that is down). */
  flush_timeout_seconds: flushTimeout,
});

/** Shape of `logger:`. */
export const loggerSchema = z
  .strictObject({
    /**
     * Where metrics go: `console` prints a progress line per step (on the CLI, or where
     * `runRecipe`'s `progress` option points); `jsonl` is the run folder's `metrics.jsonl`,
     * which every run writes (reports, resumes and `nexrl sample` read it), listed or not;
     * `tensorboard` writes TensorBoard event files into the run folder (`tensorboard --logdir
     * runs/` charts every run); `mlflow` logs to an MLflow tracking server over its REST API
     * (`logger.mlflow`); `wandb` logs to Weights & Biases over its HTTP API (`logger.wandb`).
     */
    backend: z.array(nonEmpty).default(["console"]),
    /** Settings of the `mlflow` logger; only with `mlflow` in `backend`. */
    mlflow: mlflowSchema.optional(),
    /** Settings of the `wandb` logger; only with `wandb` in `backend`. */
    wandb: wandbSchema.optional(),
    /** NexRL's Feishu (Lark) cards: not supported, only `false` is accepted. */
    enable_feishu_logging: z.boolean().default(false),
    /** NexRL's Feishu webhook: not supported, refused when set. */
    feishu_url: z.string().optional(),
  })
  .superRefine((logger, ctx) => {
    const supported = `supported: ${LOGGER_BACKENDS.join(", ")}`;
    logger.backend.forEach((name, i) => {
      if ((LOGGER_BACKENDS as readonly string[]).includes(name)) return;
      const why = UNSUPPORTED_LOGGERS[name];
      const guess = didYouMean(name, LOGGER_BACKENDS);
      refuse(
        ctx,
        ["backend", i],
        why !== undefined
          ? `${name} is not supported: ${why}. metrics.jsonl holds every metric of every step (\`nexrl report\` charts them); ${supported}`
          : `unknown logger "${name}"${guess ? ` (did you mean "${guess}"?)` : ""}; ${supported}`,
      );
    });
    for (const name of ["mlflow", "wandb"] as const)
      if (logger[name] !== undefined && !logger.backend.includes(name))
        refuse(
          ctx,
          [name],
          `logger.${name} sets the ${name} logger, which logger.backend does not list: add ${name} to logger.backend or remove logger.${name}`,
        );
    if (logger.enable_feishu_logging)
      refuse(ctx, ["enable_feishu_logging"], "Feishu notifications are not supported; remove it (or set it to false)");
    if (logger.feishu_url)
      refuse(ctx, ["feishu_url"], "Feishu notifications are not supported, so nothing would post to it; remove it");
  })
  .prefault({});

/** Shape of `accounting:` — what a run's tokens cost. */
export const accountingSchema = z
  .strictObject({
    /**
     * Prices per million tokens, in the currency of your choice (the figures carry no unit):
     * `prompt` for prompt tokens the sampler reads (sampling prompts, reference and teacher
     * logprobs), `completion` for tokens it generates, `train` for tokens the trainer runs
     * forward and backward. With them, each metrics row has `cost/step` and `cost/total`.
     */
    prices: z
      .strictObject({
        /** Per million prompt tokens read by the sampler. */
        prompt: z.number().min(0),
        /** Per million tokens generated. */
        completion: z.number().min(0),
        /** Per million tokens trained on. */
        train: z.number().min(0),
      })
      .optional(),
  })
  .prefault({});

/** Shape of `resume:`. */
export const resumeSchema = z
  .strictObject({
    /** `disable`: start fresh; `auto`: latest checkpoint under `trainer.checkpoint_path`; `from_path`: `resume_path`. */
    mode: z.enum(["disable", "auto", "from_path"]).default("disable"),
    /** Checkpoint to resume from when `mode` is `from_path`. */
    resume_path: z.string().default(""),
    /** Skip the batches already trained on. */
    resume_dataloader: z.boolean().default(true),
    /**
     * Settings a resume may change although they decide the data order or the algorithm (a
     * resume that changes one is refused otherwise), as key paths: `[data.seed]`; a key covers
     * the keys below it (`[data]`).
     */
    allow_changed: z.array(nonEmpty).default([]),
  })
  .superRefine((resume, ctx) => {
    if (resume.mode === "from_path" && resume.resume_path === "") {
      ctx.addIssue({
        code: "custom",
        path: ["resume_path"],
        message: "required when `mode` is `from_path`: the checkpoint to resume from",
      });
    }
  })
  .prefault({});

/**
 * Shape of `init:`: the weights a fresh run starts from (a warm start), instead of the base
 * model's. Applies only when the run starts afresh: a resumed run continues its own checkpoint.
 */
export const initSchema = z
  .strictObject({
    /**
     * A recipe (path beside this one, or from the current folder) run first, whose final
     * checkpoint's weights this run starts from. It runs once into
     * `<NEXRL_STORAGE_PATH or ./runs>/init/<name>-<fingerprint>/` and is reused while its inputs
     * (the resolved recipe, its data files and the modules it names) are unchanged.
     */
    from_recipe: nonEmpty.optional(),
    /** A checkpoint (a run folder, its `checkpoints/` folder or a `step_NNNNNN.json` file) whose weights this run starts from. */
    from_checkpoint: nonEmpty.optional(),
  })
  .superRefine((init, ctx) => {
    if ((init.from_recipe === undefined) === (init.from_checkpoint === undefined))
      ctx.addIssue({
        code: "custom",
        path: init.from_recipe === undefined ? [] : ["from_checkpoint"],
        message:
          init.from_recipe === undefined
            ? "needs `from_recipe` (a recipe to run first) or `from_checkpoint` (a checkpoint's weights)"
            : "give `from_recipe` or `from_checkpoint`, not both",
      });
  });

/**
 * Shape of `environment:` (NexRL sources a script in the job's pod). nexrl runs no script: only
 * the empty values NexRL recipes carry are accepted.
 */
export const environmentSchema = z
  .strictObject({
    /** NexRL's setup script; refused when set (source it in your shell before `nexrl`). */
    setup_script: z.string().default(""),
    /** NexRL's check that the script exists; only `false` is accepted. */
    require_setup_script: z.boolean().default(false),
  })
  .superRefine((environment, ctx) => {
    if (environment.setup_script !== "")
      refuse(
        ctx,
        ["setup_script"],
        `nexrl runs no setup script: source it in your shell first (\`source ${environment.setup_script} && nexrl …\`) and remove this key`,
      );
    if (environment.require_setup_script)
      refuse(ctx, ["require_setup_script"], "nexrl runs no setup script; remove it (or set it to false)");
  });

/** Shape of `runtime_monitor:`. */
export const runtimeMonitorSchema = z
  .strictObject({
    /** What a failure does once retries are exhausted: stop the run (`stop_on_error`, `stop_on_critical`) or drop the task and go on (`continue`). */
    exception_handling: z
      .strictObject({
        /** Failures are always handled; only `true` is accepted. */
        enabled: z.boolean().default(true),
        /** NexRL polls for failures; nexrl handles each as it happens, so this is refused when set. */
        check_interval: z.number().positive().optional(),
        /** What a failure does once retries are exhausted. */
        policy: z.enum(["stop_on_error", "stop_on_critical", "continue"]).default("stop_on_error"),
      })
      .prefault({}),
    /** NexRL's actor health checks (real only under `launch_mode: ray`): accepted only with `enabled: false`. */
    health_check: z
      .strictObject({
        /** Whether to check; only `false` is accepted. */
        enabled: z.boolean().optional(),
        /** Seconds between checks. */
        check_interval: z.number().positive().optional(),
        /** Seconds before a check fails. */
        timeout: z.number().positive().optional(),
      })
      .optional(),
    /** NexRL's progress lines while rolling out: accepted only with `enabled: false` (nexrl prints a line per step). */
    rollout_progress_monitor: z
      .strictObject({
        /** Whether to report; only `false` is accepted. */
        enabled: z.boolean().optional(),
        /** Seconds between progress updates. */
        update_interval: z.number().positive().optional(),
        /** Updates between progress lines. */
        log_interval: positiveInt.optional(),
        /** A progress bar. */
        use_tqdm: z.boolean().optional(),
      })
      .optional(),
  })
  .superRefine((monitor, ctx) => {
    const handling = monitor.exception_handling;
    if (!handling.enabled)
      refuse(
        ctx,
        ["exception_handling", "enabled"],
        "failures are always handled, as `policy` says; remove it (`policy: continue` skips failed rollouts)",
      );
    if (handling.check_interval !== undefined)
      refuse(
        ctx,
        ["exception_handling", "check_interval"],
        "nexrl handles each failure as it happens, with no check interval; remove it",
      );
    if (monitor.health_check && monitor.health_check.enabled !== false)
      refuse(
        ctx,
        ["health_check"],
        "nexrl runs every part of a run in this process, so there are no actors to health-check (NexRL checks them only under launch_mode: ray); a rollout that hangs is ended by rollout_worker.rollout_timeout_seconds. Remove runtime_monitor.health_check",
      );
    if (monitor.rollout_progress_monitor && monitor.rollout_progress_monitor.enabled !== false)
      refuse(
        ctx,
        ["rollout_progress_monitor"],
        "nexrl prints one progress line per step (logger.backend: console), not progress within a step; remove runtime_monitor.rollout_progress_monitor",
      );
  })
  .prefault({});
