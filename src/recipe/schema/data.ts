/**
 * `data:` and `validate:` — the task files and how they are batched (inventory §6).
 * @module
 */
import { z } from "zod";
import { nonEmpty, nonNegativeInt, positiveInt, refuse, type IssueSink } from "./common.js";

/** The keys of `data:` and `validate.data:`. */
const dataShape = {
  /** `torch`: rows read from `data_files` (NexRL's name for the file loader). NexRL's synthetic `mock` tasks are refused. */
  type: z.enum(["torch", "mock"]).default("torch"),
  /** Task files (`.jsonl`, one JSON object per line), resolved from the recipe's folder, then the current directory. */
  data_files: z.array(nonEmpty).optional(),
  /** Seed of the shuffle (and of the run). */
  seed: z.int().default(42),
  /** Tasks per dataloader batch (before `rollout_repeat_n`). */
  batch_size: positiveInt.default(32),
  /** Hand out the next batch only after the weights were synced (required by `sync` and `batch-async`). */
  keep_batch_order: z.boolean().default(true),
  /** Rollouts per task (the GRPO group size). */
  rollout_repeat_n: positiveInt.default(1),
  /** The task field that holds the prompt. */
  prompt_key: nonEmpty.default("prompt"),
  /** Drop tasks whose prompt is longer than `max_prompt_length` tokens. */
  filter_prompts: z.boolean().default(false),
  /** Longest prompt, in tokens. */
  max_prompt_length: positiveInt.default(1024),
  /** NexRL compatibility: must equal `rollout_worker.max_response_length` when given. */
  max_response_length: positiveInt.optional(),
  /** Tokenizer used to measure prompts (a model name or a `tokenizer.json` path). */
  tokenizer_path: z.string().nullable().optional(),
  /** Shuffle the tasks (seeded by `seed`). */
  shuffle: z.boolean().default(false),
  /** Drop the last batch when it is smaller than `batch_size`. */
  drop_last: z.boolean().default(false),
  /** NexRL's prompt form of `mock` tasks: refused when set, as `mock` data is. */
  mock_api_type: z.enum(["completion", "generate"]).optional(),
};

/** The checks `data:` and `validate.data:` share. */
function checkData(data: { type: string; data_files?: string[] | undefined; mock_api_type?: string }, ctx: IssueSink) {
  if (data.type === "mock") {
    refuse(
      ctx,
      ["type"],
      "NexRL's synthetic `mock` tasks are not available: list task files in `data_files` with `type: torch`",
    );
  } else if ((data.data_files ?? []).length === 0) {
    ctx.addIssue({
      code: "custom",
      path: ["data_files"],
      message: "required when `type` is `torch`: list the task files, e.g. `[data/train.jsonl]`",
    });
  }
  if (data.mock_api_type !== undefined)
    refuse(ctx, ["mock_api_type"], "applies to `mock` data, which is not available; remove it");
}

/** Shape of `data:` — the training tasks. */
export const dataSchema = z.strictObject(dataShape).superRefine(checkData);

/**
 * Shape of `validate.data:` — the keys of `data:`. Validation runs every row of the files each
 * pass (each `rollout_repeat_n` times); with `drop_last`, the rows after the last full
 * `batch_size` batch (in file order, or a new shuffled order each pass with `shuffle`) are left out.
 */
export const validationDataSchema = z
  .strictObject({
    ...dataShape,
    /** Refused when set: validation runs every task on the same weights, so there is no batch order to keep. */
    keep_batch_order: z.boolean().optional(),
  })
  .superRefine((data, ctx) => {
    checkData(data, ctx);
    if (data.keep_batch_order !== undefined)
      refuse(
        ctx,
        ["keep_batch_order"],
        "validation runs every task on the same weights, so there is no batch order to keep (it applies to `data:`); remove it",
      );
  });

/** Shape of `validate:` — validation rollouts between training steps. */
export const validateSchema = z
  .strictObject({
    /** Run one validation pass before the first training step. */
    validate_before_train: z.boolean().default(false),
    /** The validation tasks. */
    data: validationDataSchema.optional(),
    /** When to validate. */
    eval: z
      .strictObject({
        /** NexRL's only evaluator type. */
        type: z.enum(["default"]).default("default"),
        /** Validate every this many weight versions; 0 never. */
        validate_freq: nonNegativeInt.default(0),
      })
      .prefault({}),
  })
  .superRefine((validate, ctx) => {
    if ((validate.validate_before_train || validate.eval.validate_freq > 0) && validate.data === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["data"],
        message: "required when validation is on (`validate_before_train` or `eval.validate_freq` > 0)",
      });
    }
  });
