/**
 * nexrl: post-train LLMs and agents with RL and SFT from TypeScript.
 *
 * This is the package root, `import … from "nexrl"`: what a user of the package writes against.
 * Every name here is listed on purpose and recorded in the API report (`etc/nexrl.api.md`);
 * advanced entry points are `nexrl/engine` (the embedded CPU model), `nexrl/server` (`nexrl
 * serve` in a program) and `nexrl/testing` (helpers for tests of workers and data). Anything not
 * exported here or there is internal and may change in any release.
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
export {
  type Datum,
  type ModelInput,
  type ModelInputChunk,
  type EncodedTextChunk,
  type ImageChunk,
  type ImageAssetPointerChunk,
  type TensorData,
  type TensorDtype,
  type AdamParams,
  DEFAULT_ADAM_PARAMS,
  adamParams,
  datum,
  tensorData,
  tensorValues,
  modelInputFromTokens,
  modelInputTokens,
  modelInputLength,
  type SamplingParams,
  type SampledSequence,
  type SampleOutput,
  type LossFnOutput,
  type ForwardBackwardOutput,
  type OptimStepOutput,
  type Tokenizer,
  type ChatMessage,
  type ToolCall,
  type ToolDefinition,
  type ChatTemplateOptions,
  type EncodeOptions,
  type DecodeOptions,
  type UnknownIdHandling,
  unknownTokenPlaceholder,
  encodePrompt,
} from "./types/index.js";
/** @category Contracts */
export type { RolloutTask, TaskGroup } from "./contracts/task.js";
/** @category Contracts */
export type { DataRow } from "./contracts/task.js";
/** @category Contracts */
export { BaseRolloutWorker } from "./contracts/rollout-worker.js";
/** @category Contracts */
export type { RolloutWorkerConfig } from "./recipe/schema/recipe.js";
/** @category Contracts */
export {
  type AgentOptions,
  type RolloutResult,
  type RolloutWorkerContext,
  type TruncatedSequence,
  type WorkerSettings,
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
export { completionTrajectory } from "./pipeline/workers/completion-trajectory.js";
/** @category Contracts */
export { BaseTrainer } from "./pipeline/trainers/base-trainer.js";
/** @category Contracts */
export type {
  AlgorithmConfig,
  Trainer,
  TrainerContext,
  TrainerSettings,
  TrainStepResult,
} from "./contracts/trainer.js";

/** @category Losses */
export {
  lossFunctions,
  LOSS_FUNCTION_NAMES,
  getLossFunction,
  type LossFunctionName,
  type BuiltinLossName,
  type ServerDefinedLossName,
  type LossBackend,
  type LossInputSpec,
  type LossEvaluation,
  type LossInputValues,
  type BuiltinLossContract,
  type ServerDefinedLossContract,
  type LossFunctionContract,
} from "./contracts/losses.js";
/** @category Losses */
export { validateLossInputs, type ValidateLossInputsOptions } from "./types/loss-validation.js";
/** @category Losses */
export { forwardBackwardCustom, type LossPassClient } from "./services/training/custom-loss.js";
/** @category Losses */
export type { CustomLossFn, CustomLossResult } from "./contracts/training.js";
/** @category Losses */
export { pairwiseLogisticLoss, type PairwiseLossOptions } from "./pipeline/trainers/pairwise-loss.js";
/** @category Losses */
export { groupAdvantages, type GroupAdvantageOptions, type GroupAdvantages } from "./pipeline/trainers/advantages.js";
/** @category Losses */
export {
  discountedFutureSum,
  distillationAdvantages,
  klPenaltyAdvantages,
  type DistillationResult,
  type KlPenaltyInput,
  type KlPenaltyResult,
} from "./pipeline/trainers/token-advantages.js";

/** @category Recipes */
export { defineRecipe, type Interpolable, type Interpolation, type RecipeInput } from "./recipe/define.js";
/** @category Recipes */
export { loadRecipe, type LoadedRecipe, type LoadRecipeOptions } from "./recipe/load.js";
/** @category Recipes */
export type { RecipeConfig } from "./recipe/schema/recipe.js";
/** @category Recipes */
export { runRecipe, type RunRecipeOptions } from "./pipeline/run-recipe.js";
/** @category Recipes */
export type {
  MetricsRow,
  RunCheckpointEvent,
  RunEndEvent,
  RunEvent,
  RunInit,
  RunInitEvent,
  RunOutputs,
  RunResult,
  RunRolloutFailureEvent,
  RunStartEvent,
  RunStepEvent,
  RunValidationEvent,
  RunWarningEvent,
  StopReason,
} from "./pipeline/events.js";
/** @category Recipes */
export type { ValidationExample } from "./pipeline/validation-examples.js";
/** @category Recipes */
export { DEFAULT_LOCAL_MODEL } from "./recipe/schema/service.js";
/** @category Recipes */
export type { ProgressOutput } from "./pipeline/progress.js";
/** @category Recipes */
export { RESUME_SAFE_SETTINGS } from "./pipeline/resume-settings.js";

/** @category Built-in workers and trainers */
export { PigLatinRolloutWorker } from "./pipeline/workers/pig-latin.js";
/** @category Built-in workers and trainers */
export { SftRolloutWorker } from "./pipeline/workers/sft.js";
/** @category Contracts */
export { VALIDATION_TARGET, type ValidationTarget } from "./pipeline/validation-nll.js";
/** @category Built-in workers and trainers */
export { SingleTurnMathRolloutWorker } from "./pipeline/workers/single-turn-math.js";
/** @category Built-in workers and trainers */
export { SimpleRolloutWorker } from "./pipeline/workers/simple.js";
/** @category Built-in workers and trainers */
export { CrossEntropyTrainer, type CrossEntropyTrainerOptions } from "./pipeline/trainers/cross-entropy.js";
/** @category Built-in workers and trainers */
export { GrpoTrainer, type GrpoTrainerOptions, type KlPenaltyOptions } from "./pipeline/trainers/grpo.js";
/** @category Built-in workers and trainers */
export { OnPolicyDistillationTrainer } from "./pipeline/trainers/opd.js";
/** @category Built-in workers and trainers */
export { LlmJudge, type JudgeItem, type JudgeVerdict } from "./pipeline/rewards/llm-judge.js";
/** @category Built-in workers and trainers */
export type { LlmJudgeOptions } from "./contracts/judge.js";
/** @category Built-in workers and trainers */
export { PreferenceRolloutWorker } from "./pipeline/workers/preference.js";
/** @category Built-in workers and trainers */
export { PreferenceTrainer, preferencePairs, type ScoredSequence } from "./pipeline/trainers/preference.js";
/** @category Built-in workers and trainers */
export { DpoTrainer } from "./pipeline/trainers/dpo.js";
/** @category Built-in workers and trainers */
export { RewardModelTrainer } from "./pipeline/trainers/reward-model.js";
/** @category Built-in workers and trainers */
export {
  RemoteApiTrainer,
  RemoteApiCrossEntropyTrainer,
  RemoteApiGrpoTrainer,
  RemoteApiOpdTrainer,
  RemoteApiPreferenceTrainer,
  RemoteApiDpoTrainer,
  RemoteApiRewardModelTrainer,
} from "./pipeline/trainers/deprecated-names.js";
/** @category Built-in workers and trainers */
export {
  RewardModelScorer,
  rewardModelSequence,
  REWARD_MODEL_QUESTION,
  REWARD_MODEL_JUDGEMENT,
  type RewardModelSequence,
} from "./pipeline/rewards/reward-model.js";

/** @category Services */
export {
  createTrainingService,
  type TrainingServiceOptions,
  type TrainingBackend,
  type TrainingService,
  type TrainingClient,
  type SamplingClient,
  type ApiFuture,
  type SavedPath,
  type ModelInfo,
  type CreateTrainingClientOptions,
  type SaveStateOptions,
  LocalTrainingService,
  type LocalTrainingServiceOptions,
  TinkerTrainingService,
  type TinkerServiceOptions,
  TINKER_DEFAULT_BASE_URL,
  TinkerRestClient,
  parseTinkerPath,
  type ParsedTinkerPath,
  type TinkerCheckpoint,
  type TinkerPage,
  type TinkerTrainingRun,
  WeaverTrainingService,
  type WeaverServiceOptions,
  WEAVER_DEFAULT_BASE_URL,
  WeaverTrainingClient,
  type WeaverCheckpointType,
  WeaverSamplingClient,
  type PauseMode,
  type PollOptions,
} from "./services/training/index.js";
/** @category Services */
export type { TinkerWire, TinkerNegotiation, TinkerFlags } from "./services/training/tinker/generation.js";
/** @category Services */
export type { BackoffOptions } from "./http/backoff.js";
/** @category Services */
export type { RemoteServiceOptions } from "./services/training/remote/session.js";
/** @category Services */
export type { EndpointOptions } from "./http/endpoint.js";
/** @category Services */
export {
  type InferenceClient,
  type InferenceOptions,
  type InferenceResult,
  type FinishReason,
  SamplerInferenceClient,
  type SamplerInferenceClientOptions,
  OpenAIInferenceClient,
  type OpenAIInferenceClientOptions,
  type SamplingDefaults,
  loadTokenizer,
  type LoadTokenizerOptions,
  HfTokenizer,
  type HfTokenizerOptions,
  RENDERER_IDS,
  type RendererId,
  readTokenizerFolder,
  type HfTokenizerFiles,
  downloadTokenizer,
  defaultTokenizerCacheDir,
  type HubDownloadOptions,
} from "./services/inference/index.js";
/** @category Services */
export { MODEL_PRESETS, type ModelConfig, type ModelPresetName } from "./engine/config.js";
/** @category Services */
export type { ComputeOptions } from "./engine/runtime.js";
/** @category Services */
export type { KernelKind } from "./engine/matrix.js";

/** @category Agents */
export { AgentGateway, ROLLOUT_ID_HEADER, type AgentGatewayOptions } from "./agent/gateway.js";
/** @category Agents */
export { RolloutSession, type RolloutOptions } from "./agent/session.js";
/** @category Agents */
export type { FailedRequests, GatewayCall, RolloutTrace, TruncationReason } from "./agent/trace.js";
/** @category Agents */
export {
  mergeCalls,
  type MergedSequence,
  type MergedTrace,
  type MergeOptions,
  type PrefixBreak,
} from "./agent/merge.js";
/** @category Agents */
export {
  episodeTrajectories,
  type EpisodeScore,
  type EpisodeSequence,
  type EpisodeTrajectoryOptions,
  type TrajectoryWeight,
} from "./agent/episode.js";
/** @category Agents */
export { Evaluator, type EvaluationRunResult, type EvaluationTarget } from "./agent/evaluator.js";
/** @category Agents */
export { AgentRolloutWorker, type AgentWorkerSetup } from "./agent/worker.js";
/** @category Agents */
export type { AgentContext, AgentEpisodeResult, AgentFunction, AgentResult } from "./agent/agent-module.js";
/** @category Agents */
export {
  loadAgentConfig,
  type AgentTool,
  type DeclarativeAgentConfig,
  type SystemPromptTemplate,
  type ToolContext,
  type ToolFunction,
} from "./agent/declarative/config.js";
/** @category Agents */
export { declarativeAgent } from "./agent/declarative/loop.js";
/** @category Agents */
export { parseToolCalls, formatToolCall, type ParsedToolCalls } from "./agent/tool-calls.js";
/** @category Agents */
export {
  CHAT_FAMILIES,
  chatParserFor,
  REASONING_PARSERS,
  TOOL_PARSERS,
  type ChatFamily,
  type ChatFormat,
  type ChatParser,
  type ChatParserChoice,
  type ParsedReply,
  type ParseOptions,
  type ReasoningParser,
} from "./services/inference/chat-formats/index.js";
/** @category Agents */
export type { PushedEpisode, PushedTrajectory, PushRules } from "./agent/push.js";

/** @category After the run */
export {
  formatRunSummary,
  summarizeMetrics,
  type AccountingFigure,
  type FirstLast,
  type FormatRunSummaryOptions,
  type ProblemCount,
  type RunSummary,
  type StepValue,
} from "./pipeline/run-summary.js";
/** @category After the run */
export { tokenCost, type TokenCounts, type TokenPrices } from "./pipeline/accounting.js";
/** @category After the run */
export type { ResponseTokens, SampleCall, SampleDiagnostic, SampleRow } from "./pipeline/samples.js";
/** @category After the run */
export type { JudgeRecord } from "./pipeline/rewards/math-judge.js";
/** @category After the run */
export type { FailureKind, FailureRow } from "./pipeline/failures.js";
/** @category After the run */
export type { StepRow } from "./pipeline/jsonl-log.js";
/** @category After the run */
export {
  readRunFolder,
  readRunWeights,
  openRunModel,
  parseRunModelRef,
  type RunFolder,
  type RunSession,
  type RunCheckpoint,
  type RunSnapshot,
  type RunWeights,
  type OpenRunModelOptions,
  type RunModel,
  type RunModelRef,
} from "./run-folder/index.js";
/** @category After the run */
export {
  writeReport,
  readReportData,
  serveReport,
  type ReportChart,
  type ReportCheckpoint,
  type ReportData,
  type ReportFamily,
  type ReportSummary,
  type SummaryItem,
  type ReportSourceOptions,
  type WriteReportOptions,
  type ReportServer,
  type ServeReportOptions,
} from "./report/index.js";

/** @category Errors */
export {
  NexrlError,
  APIError,
  BadRequestError,
  AuthenticationError,
  PaymentRequiredError,
  PermissionDeniedError,
  NotFoundError,
  ConflictError,
  UnprocessableEntityError,
  RateLimitError,
  InternalServerError,
  APIConnectionError,
  APITimeoutError,
  APIUserAbortError,
  RemoteOperationError,
  UnexpectedResponseError,
  ConfigError,
  ListenError,
  UsageError,
  RecipeError,
  InputError,
  ContextLengthError,
  UserCodeError,
  JudgeError,
  RolloutError,
  RunError,
  DistributedError,
  EngineError,
  StorageError,
  ProtocolError,
  isRetryableStatus,
  type NexrlErrorOptions,
  type APIErrorContext,
  type APIErrorOptions,
  type APIStatusDetails,
  type APIConnectionErrorOptions,
  type APITimeoutErrorOptions,
  type APIUserAbortErrorOptions,
  type RemoteService,
  type RemoteErrorCategory,
  type RemoteOperationDetails,
  type ListenProblem,
  type ListenErrorOptions,
  type RecipeIssue,
  type UserModuleFailure,
  type RecipeProblem,
  type RecipeErrorOptions,
  type ContextLengthErrorOptions,
  type UserCodeProblem,
  type RolloutOrigin,
  type RolloutErrorOptions,
  type RunLockHolder,
  type ChangedSetting,
  type RunProblem,
  type RunErrorOptions,
  type StateFileProblem,
  type EngineProblem,
  type EngineErrorOptions,
  type StorageProblem,
  type ProtocolErrorOptions,
} from "./errors.js";

import { provideBuiltins } from "./builtins.js";

// The package root plugs the agent service into the pipeline and offers itself to CommonJS user modules.
provideBuiltins(() => import("./index.js"));
