/**
 * Building the parts of a run from its recipe.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import type { InferenceClient } from "../contracts/inference.js";
import type { TrainingService } from "../contracts/training.js";
import type { ClassOptions } from "../contracts/options.js";
import { encodePrompt, type Tokenizer } from "../wire/tokenizer.js";
import { DataLoader } from "../data/data-loader.js";
import type { FailurePolicy } from "../rollouts/failure-policy.js";
import { RolloutRunner, type RemoteAttempts, type RolloutFailure } from "../rollouts/runner.js";
import type { RolloutWorkerClass } from "../workers/registry.js";
import type { RolloutTask } from "../contracts/task.js";
import { workerSettings } from "../recipe/settings.js";

/** The keys of a recipe's `data:` section that `validate.data:` shares. */
export type DataConfig = Omit<RecipeConfig["data"], "keep_batch_order">;

/** Tokens of a prompt as the model reads it: text with BOS, chat messages through the template. */
function promptLength(tokenizer: Tokenizer, prompt: RolloutTask["prompt"]): number {
  if (typeof prompt === "string") return encodePrompt(tokenizer, prompt).length;
  return tokenizer.applyChatTemplate(prompt, { addGenerationPrompt: true }).length;
}

/**
 * A loader over `data.data_files` with the section's batching, order and prompt filter (which
 * needs the `tokenizer`: without one, prompts are not measured).
 */
export function openDataLoader(
  data: DataConfig,
  tokenizer: Tokenizer | undefined,
  isVal: boolean,
): Promise<DataLoader> {
  return DataLoader.fromFiles(data.data_files ?? [], {
    promptKey: data.prompt_key,
    batchSize: data.batch_size,
    seed: data.seed,
    shuffle: data.shuffle,
    dropLast: data.drop_last,
    rolloutRepeatN: data.rollout_repeat_n,
    isVal,
    ...(data.filter_prompts &&
      tokenizer && {
        filter: {
          maxPromptLength: data.max_prompt_length,
          measure: (prompt) => promptLength(tokenizer, prompt),
        },
      }),
  });
}

/** What {@link createRunner} needs besides the recipe. */
export interface RunnerParts {
  /** The worker class. */
  workerClass: RolloutWorkerClass;
  /** The options its instances are constructed with (`rollout_worker.options`, checked). */
  workerOptions: ClassOptions;
  /** Worker names are `<prefix>-<slot>`. */
  namePrefix: string;
  /** The tokenizer. */
  tokenizer: Tokenizer;
  /** The run's training service, given to workers (for a reward model's sampler). */
  service?: TrainingService;
  /** Inference for the rollouts, if they may sample. */
  inference: InferenceClient | undefined;
  /** The failure policy. */
  policy: FailurePolicy;
  /** Longest accepted trajectory. */
  maxSequenceLength: number | undefined;
  /** The model's vocabulary size, when the service reports it. */
  vocabSize?: number;
  /** Policy version stamped on rollouts that sampled nothing. */
  currentVersion(): number;
  /** Aborts rollouts in flight. */
  signal: AbortSignal;
  /** Told of every failed rollout attempt. */
  onFailure?(failure: RolloutFailure): void;
  /** Runs the attempts on `nexrl worker` processes instead (`rollout_worker.distributed`). */
  remote?: RemoteAttempts;
}

/** A {@link RolloutRunner} with the recipe's concurrency, timeout and sampling defaults. */
export function createRunner(config: RecipeConfig, parts: RunnerParts): RolloutRunner {
  const worker = config.rollout_worker;
  return new RolloutRunner({
    createWorker: (slot) =>
      new parts.workerClass({
        name: `${parts.namePrefix}-${slot}`,
        settings: workerSettings(config),
        tokenizer: parts.tokenizer,
        options: parts.workerOptions,
        ...(parts.service && { service: parts.service }),
      }),
    numWorkers: worker.num_workers,
    timeoutMs: worker.rollout_timeout_seconds * 1000,
    policy: parts.policy,
    ...(parts.inference && { inference: parts.inference }),
    sampling: { temperature: worker.temperature, maxTokens: worker.max_response_length },
    ...(parts.maxSequenceLength !== undefined && { maxSequenceLength: parts.maxSequenceLength }),
    ...(parts.vocabSize !== undefined && { vocabSize: parts.vocabSize }),
    currentVersion: parts.currentVersion,
    signal: parts.signal,
    ...(parts.onFailure && { onFailure: parts.onFailure }),
    ...(parts.remote && { remote: parts.remote }),
  });
}
