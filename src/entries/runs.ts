/**
 * `nexrl/runs`: a run from the outside — the events `runRecipe` reports and the options that
 * shape it, the rows of the files a run writes (`metrics.jsonl`, `samples.jsonl`,
 * `failures.jsonl`), reading a run folder and its weights, opening the trained model, the run
 * summary and token costs, and the report.
 *
 * @packageDocumentation
 * @module nexrl/runs
 */

/** @category Run events */
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
} from "../outputs/events.js";
/** @category Run events */
export type { ValidationExample } from "../rollouts/validation-examples.js";
/** @category Run events */
export type { ProgressOutput } from "../outputs/progress.js";
/** @category Recipes */
export type { Interpolable, Interpolation } from "../recipe/define.js";
/** @category Recipes */
export type { RolloutWorkerConfig } from "../recipe/schema/recipe.js";
/** @category Recipes */
export { RESUME_SAFE_SETTINGS } from "../outputs/resume-settings.js";
/** @category Run files */
export type { ResponseTokens, SampleCall, SampleDiagnostic, SampleRow } from "../outputs/samples.js";
/** @category Run files */
export type { JudgeRecord } from "../rewards/math-judge.js";
/** @category Run files */
export type { FailureKind, FailureRow } from "../outputs/failures.js";
/** @category Run files */
export type { FailureAction } from "../rollouts/runner.js";
/** @category Run files */
export type { StepRow } from "../outputs/jsonl-log.js";
/** @category Run folder */
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
} from "../run-folder/index.js";
/** @category Summary */
export { formatRunSummary, summarizeMetrics, type FormatRunSummaryOptions } from "../outputs/run-summary.js";
/** @category Summary */
export type { AccountingFigure, FirstLast, ProblemCount, RunSummary, StepValue } from "../outputs/events.js";
/** @category Summary */
export { tokenCost, type TokenCounts, type TokenPrices } from "../outputs/accounting.js";
/** @category Report */
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
} from "../report/index.js";
