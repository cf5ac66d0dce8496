/**
 * `data:` and `validate:` — the task files and how they are batched (inventory §6).
 * @module
 */
import { z } from "zod";
import { nonEmpty, nonNegativeInt, positiveInt } from "./common.js";

/** Shape of `data:` (and of `validate.data:`). */
export const dataSchema = z
  .strictObject({
    /** `torch`: rows read from `data_files` (NexRL's name for the file loader); `mock`: synthetic tasks. */
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
    /** Prompt form of `mock` tasks: plain text (`completion`) or chat messages (`generate`). */
    mock_api_type: z.enum(["completion", "generate"]).default("completion"),
  })
  .superRefine((data, ctx) => {
    if (data.type === "torch" && (data.data_files ?? []).length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["data_files"],
        message: "required when `type` is `torch`: list the task files, e.g. `[data/train.jsonl]`",
      });
    }
  });

/** Shape of `validate:` — validation rollouts between training steps. */
export const validateSchema = z
  .strictObject({
    /** Run one validation pass before the first training step. */
    validate_before_train: z.boolean().default(false),
    /** The validation tasks (no `rollout_repeat_n` repetition; `keep_batch_order` is ignored). */
    data: dataSchema.optional(),
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
