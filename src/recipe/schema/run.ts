/**
 * Run-level sections: `logger:`, `resume:`, `environment:`, `runtime_monitor:` (inventory §7).
 * @module
 */
import { z } from "zod";
import { nonEmpty, positiveInt } from "./common.js";

/** Shape of `logger:`. */
export const loggerSchema = z
  .strictObject({
    /** Where metrics go. */
    backend: z.array(z.enum(["console", "wandb", "mlflow", "swanlab"])).default(["console"]),
    /** Post start/finish/error cards to a Feishu (Lark) webhook. */
    enable_feishu_logging: z.boolean().default(false),
    /** The Feishu webhook URL. */
    feishu_url: z.string().optional(),
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

/** Shape of `environment:` (NexRL compatibility: a script sourced in the job's pod; ignored). */
export const environmentSchema = z.strictObject({
  /** Script path, relative to the recipe. */
  setup_script: z.string().default(""),
  /** Fail when the script is missing. */
  require_setup_script: z.boolean().default(false),
});

/** Shape of `runtime_monitor:`. */
export const runtimeMonitorSchema = z
  .strictObject({
    /** What a failure does once retries are exhausted: stop the run (`stop_on_error`, `stop_on_critical`) or drop the task and go on (`continue`). */
    exception_handling: z
      .strictObject({
        /** Watch for failures. */
        enabled: z.boolean().default(true),
        /** Seconds between checks. */
        check_interval: z.number().positive().default(1),
        /** What a failure does once retries are exhausted. */
        policy: z.enum(["stop_on_error", "stop_on_critical", "continue"]).default("stop_on_error"),
      })
      .prefault({}),
    /** NexRL compatibility (Ray actor health checks); ignored. */
    health_check: z
      .strictObject({
        /** Run health checks. */
        enabled: z.boolean().default(true),
        /** Seconds between checks. */
        check_interval: z.number().positive().default(10),
        /** Seconds before a check fails. */
        timeout: z.number().positive().default(20),
      })
      .prefault({}),
    /** Progress lines while rolling out. */
    rollout_progress_monitor: z
      .strictObject({
        /** Report progress. */
        enabled: z.boolean().default(true),
        /** Seconds between progress updates. */
        update_interval: z.number().positive().default(1),
        /** Updates between progress lines. */
        log_interval: positiveInt.default(10),
        /** NexRL compatibility (a progress bar); ignored. */
        use_tqdm: z.boolean().default(true),
      })
      .prefault({}),
  })
  .prefault({});
