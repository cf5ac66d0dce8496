/**
 * The training pipeline: data loading, rollout workers, the trajectory pool, trainers, weight
 * sync, validation, checkpoints and {@link runRecipe}.
 * @module
 */
export { runRecipe, type RunRecipeOptions } from "./run-recipe.js";
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
} from "./events.js";
export type { ProgressOutput } from "./progress.js";
export {
  formatRunSummary,
  summarizeMetrics,
  type AccountingFigure,
  type FirstLast,
  type FormatRunSummaryOptions,
  type ProblemCount,
  type RunSummary,
  type StepValue,
} from "./run-summary.js";
export { tokenCost, type TokenCounts, type TokenPrices } from "./accounting.js";
export type { ResponseTokens, SampleRow } from "./samples.js";
export { resolveRunDirectory, timestampTag, type RunDirectoryOptions } from "./run-dir.js";
export type { FailureKind, FailureRow } from "./failures.js";
export { RESUME_SAFE_SETTINGS } from "./resume-settings.js";
export {
  DataLoader,
  type DataCursor,
  type DataLoaderOptions,
  type PromptFilter,
  type RequeuedRow,
} from "./data/data-loader.js";
export { DATA_FILE_EXTENSIONS, readDataFile, readRowTable, type DataRow } from "./data/files.js";
export { RowTable, type RowOrigin } from "./data/row-table.js";
export type { RolloutTask, TaskGroup } from "../contracts/task.js";
export { BaseRolloutWorker, type RolloutWorkerConfig } from "./workers/base.js";
export { type RolloutResult, type RolloutWorkerContext, type TruncatedSequence } from "../contracts/worker.js";
export { completionTrajectory } from "./workers/completion-trajectory.js";
export { PigLatinRolloutWorker, wordAccuracy } from "./workers/pig-latin.js";
export { PreferenceRolloutWorker } from "./workers/preference.js";
export { SingleTurnMathRolloutWorker } from "./workers/single-turn-math.js";
export { SimpleRolloutWorker } from "./workers/simple.js";
export { answersMatch, extractFinalAnswer } from "./workers/math-answer.js";
export { LlmJudge, type JudgeItem, type JudgeVerdict, type LlmJudgeOptions } from "./rewards/llm-judge.js";
export {
  RewardModelScorer,
  rewardModelSequence,
  REWARD_MODEL_QUESTION,
  REWARD_MODEL_JUDGEMENT,
  type RewardModelSequence,
} from "./rewards/reward-model.js";
export { RolloutInferenceClient, type RolloutSamplingDefaults } from "./workers/rollout-inference.js";
export { failurePolicyFromRecipe, type FailurePolicy } from "./rollout/failure-policy.js";
export {
  RolloutRunner,
  type RolloutCounts,
  type RolloutFailure,
  type RolloutOutcome,
  type RolloutRunnerOptions,
} from "./rollout/runner.js";
export {
  TrajectoryPool,
  type BatchReadiness,
  type PooledGroup,
  type PooledGroupState,
  type PoolState,
  type PoolTake,
  type TrajectoryPoolOptions,
} from "./pool.js";
export { WeightSync, type SamplerState } from "./weight-sync.js";
export { Validator, passAtK, type ValidatorOptions } from "./validation.js";
export type { ValidationExample } from "./validation-examples.js";
export { RemoteApiTrainer } from "./trainers/remote-api-trainer.js";
export type { Trainer, TrainerContext, TrainStepResult } from "../contracts/trainer.js";
export { RemoteApiCrossEntropyTrainer, type CrossEntropyTrainerOptions } from "./trainers/cross-entropy.js";
export { RemoteApiGrpoTrainer, type GrpoTrainerOptions, type KlPenaltyOptions } from "./trainers/grpo.js";
export { RemoteApiOpdTrainer } from "./trainers/opd.js";
export { RemoteApiDpoTrainer } from "./trainers/dpo.js";
export { RemoteApiRewardModelTrainer } from "./trainers/reward-model.js";
export {
  RemoteApiPreferenceTrainer,
  preferencePairs,
  type PreferenceSide,
  type ScoredSequence,
} from "./trainers/preference.js";
export { pairwiseLogisticLoss, type PairwiseLossOptions } from "./trainers/pairwise-loss.js";
export { groupAdvantages, type GroupAdvantageOptions, type GroupAdvantages } from "./trainers/advantages.js";
export {
  discountedFutureSum,
  distillationAdvantages,
  klPenaltyAdvantages,
  type DistillationResult,
  type KlPenaltyInput,
  type KlPenaltyResult,
} from "./trainers/token-advantages.js";
export { lossKind, trajectoryToDatum, type DatumOptions, type LossKind } from "./trainers/datums.js";
export { rolloutMetrics } from "./trainers/rollout-metrics.js";
export { seededRandom } from "./seed.js";
