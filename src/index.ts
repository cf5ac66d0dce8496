/**
 * nexrl: post-train LLMs and agents with RL and SFT from TypeScript.
 *
 * This is the package root, `import … from "nexrl"`: what most users write against — the
 * contracts a worker or trainer implements, recipes and `runRecipe`, the built-in workers and
 * trainers, the service factory, inference clients and tokenizers, and the errors a program
 * catches. Every name here is listed on purpose and recorded in the API report
 * (`etc/nexrl.api.md`). The rest of the public surface is in subpaths that say what they are:
 * `nexrl/wire` (datums, tensors, sampling and loss-pass results, loss contracts),
 * `nexrl/backends` (each training backend and its options, inference and tokenizer details),
 * `nexrl/algorithms` (advantages, pairwise losses, judges and trainer options),
 * `nexrl/agent` (the recording gateway, traces, episodes, evaluators, tool-call parsers),
 * `nexrl/runs` (run events, what a run wrote, the report), `nexrl/errors` (every error class),
 * and `nexrl/engine`, `nexrl/server`, `nexrl/testing`. Anything not exported by an entry point
 * is internal and may change in any release.
 *
 * Each `@category` comment names the section of the API reference the exports below it go to
 * (`scripts/typedoc-categories.js` reads them).
 *
 * @packageDocumentation
 * @module nexrl
 */

/** @category Contracts */
export { Trajectory, type PreferenceSide, type TrajectoryInit } from "./contracts/trajectory.js";
/** @category Contracts */
export type { DataRow, RolloutTask, TaskGroup } from "./contracts/task.js";
/** @category Contracts */
export { BaseRolloutWorker } from "./contracts/rollout-worker.js";
/** @category Contracts */
export type {
  AgentOptions,
  RolloutResult,
  RolloutWorkerContext,
  TruncatedSequence,
  WorkerSettings,
} from "./contracts/worker.js";
/** @category Contracts */
export type {
  ClassOptions,
  OptionsIssue,
  OptionsPathSegment,
  OptionsResult,
  OptionsSchema,
} from "./contracts/options.js";
/** @category Contracts */
export { completionTrajectory } from "./workers/completion-trajectory.js";
/** @category Contracts */
export { BaseTrainer } from "./algorithms/base-trainer.js";
/** @category Contracts */
export type {
  AlgorithmConfig,
  Trainer,
  TrainerContext,
  TrainerSettings,
  TrainStepResult,
} from "./contracts/trainer.js";
/** @category Contracts */
export type { ChatMessage, Tokenizer, ToolCall, ToolDefinition } from "./wire/tokenizer.js";
/** @category Contracts */
export type { AgentContext, AgentFunction, AgentResult } from "./contracts/agent.js";

/** @category Losses */
export { lossFunctions, type LossFunctionName } from "./contracts/losses.js";
/** @category Losses */
export { forwardBackwardCustom } from "./backends/custom-loss.js";
/** @category Losses */
export type { CustomLossFn, CustomLossResult } from "./contracts/training.js";

/** @category Recipes */
export { defineRecipe, type RecipeInput } from "./recipe/define.js";
/** @category Recipes */
export { loadRecipe, type LoadedRecipe, type LoadRecipeOptions } from "./recipe/load.js";
/** @category Recipes */
export type { RecipeConfig } from "./recipe/schema/recipe.js";
/** @category Recipes */
export { runRecipe, type RunRecipeOptions } from "./run/run-recipe.js";
/** @category Recipes */
export type { MetricsRow, RunEvent, RunResult } from "./outputs/events.js";

/** @category Built-in workers and trainers */
export { PigLatinRolloutWorker } from "./workers/pig-latin.js";
/** @category Built-in workers and trainers */
export { SftRolloutWorker } from "./workers/sft.js";
/** @category Built-in workers and trainers */
export { SingleTurnMathRolloutWorker } from "./workers/single-turn-math.js";
/** @category Built-in workers and trainers */
export { SimpleRolloutWorker } from "./workers/simple.js";
/** @category Built-in workers and trainers */
export { PreferenceRolloutWorker } from "./workers/preference.js";
/** @category Built-in workers and trainers */
export { AgentRolloutWorker } from "./agent/worker.js";
/** @category Built-in workers and trainers */
export { CrossEntropyTrainer } from "./algorithms/cross-entropy.js";
/** @category Built-in workers and trainers */
export { GrpoTrainer } from "./algorithms/grpo.js";
/** @category Built-in workers and trainers */
export { OnPolicyDistillationTrainer } from "./algorithms/opd.js";
/** @category Built-in workers and trainers */
export { PreferenceTrainer } from "./algorithms/preference.js";
/** @category Built-in workers and trainers */
export { DpoTrainer } from "./algorithms/dpo.js";
/** @category Built-in workers and trainers */
export { RewardModelTrainer } from "./algorithms/reward-model.js";
/** @category Built-in workers and trainers */
export { LlmJudge } from "./rewards/llm-judge.js";
/** @category Built-in workers and trainers */
export {
  RemoteApiTrainer,
  RemoteApiCrossEntropyTrainer,
  RemoteApiGrpoTrainer,
  RemoteApiOpdTrainer,
  RemoteApiPreferenceTrainer,
  RemoteApiDpoTrainer,
  RemoteApiRewardModelTrainer,
} from "./algorithms/deprecated-names.js";

/** @category Services */
export { createTrainingService, type TrainingServiceOptions } from "./backends/index.js";
/** @category Services */
export type { SamplingClient, TrainingBackend, TrainingClient, TrainingService } from "./contracts/training.js";
/** @category Services */
export type { InferenceClient } from "./contracts/inference.js";
/** @category Services */
export { SamplerInferenceClient } from "./inference/sampler-inference.js";
/** @category Services */
export { OpenAIInferenceClient } from "./inference/openai/client.js";
/** @category Services */
export { loadTokenizer } from "./inference/tokenizers/load.js";
/** @category Services */
export { HfTokenizer } from "./inference/tokenizers/hf-tokenizer.js";

/** @category Errors */
export {
  NexrlError,
  APIError,
  APIConnectionError,
  ConfigError,
  RecipeError,
  InputError,
  UserCodeError,
  RolloutError,
  RunError,
  EngineError,
} from "./errors.js";

import { provideBuiltins } from "./builtins.js";

// The package root plugs the agent service into the pipeline and offers itself to CommonJS user modules.
provideBuiltins(() => import("./index.js"));
