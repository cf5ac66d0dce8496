/**
 * What a run reports while it runs and when it ends.
 * @module
 */
import type { FailureRow } from "./failures.js";
import type { StepRow } from "./jsonl-log.js";
import type { ValidationExample } from "../rollouts/validation-examples.js";

/** One line of `metrics.jsonl`: flat metrics of a training step (step 0 holds validation before training). */
export interface MetricsRow extends StepRow {
  [key: string]: number | null;
}

/** Why a run ended. */
export type StopReason = "completed" | "aborted" | "data_exhausted";

/** Something that happened during a run, for `onEvent`. */
export type RunEvent =
  | RunStartEvent
  | RunStepEvent
  | RunValidationEvent
  | RunCheckpointEvent
  | RunWarningEvent
  | RunRolloutFailureEvent
  | RunEndEvent
  | RunInitEvent;

/**
 * The warm start of `init.from_recipe`, a stage before the run: `start` when that recipe begins
 * to run (its own progress follows), `reused` when its earlier run is used as it is, `done` when
 * it has run and the run itself begins.
 */
export interface RunInitEvent {
  /** Discriminator. */
  readonly type: "init";
  /** What happened. */
  readonly phase: "start" | "reused" | "done";
  /** The warm-start recipe. */
  readonly recipe: string;
  /** Its run folder. */
  readonly runDir: string;
  /** The run-state file the run starts from (with `reused` and `done`). */
  readonly checkpoint?: string;
}

/** How a run's starting weights were prepared by `init:` ({@link RunResult.init}). */
export interface RunInit {
  /** The checkpoint the run started from. */
  readonly checkpoint: string;
  /** With `init.from_recipe`: that recipe. */
  readonly recipe?: string;
  /** With `init.from_recipe`: its run folder. */
  readonly runDir?: string;
  /** With `init.from_recipe`: whether an earlier run of it was reused rather than run now. */
  readonly reused?: boolean;
}

/** The run started (fresh or from a checkpoint). */
export interface RunStartEvent {
  /** Discriminator. */
  readonly type: "start";
  /** The output folder. */
  readonly outputDir: string;
  /** Steps already done (0 for a fresh run). */
  readonly fromStep: number;
  /** `trainer.total_train_steps`. */
  readonly totalSteps: number;
  /** `fresh`, `resume` (continuing a checkpoint exactly) or `warm_start` (a checkpoint's weights, from step 0). */
  readonly start: "fresh" | "resume" | "warm_start";
  /** The run-state file it resumed or warm-started from. */
  readonly from?: string;
}

/** A training step finished and its metrics row was written. */
export interface RunStepEvent {
  /** Discriminator. */
  readonly type: "step";
  /** The step. */
  readonly step: number;
  /** Its row of `metrics.jsonl`. */
  readonly metrics: MetricsRow;
  /** Why the step trained nothing (`train/skipped` = 1), e.g. `all 4 groups had constant reward: nothing to learn from`. */
  readonly skipped?: string;
}

/** A validation pass finished. */
export interface RunValidationEvent {
  /** Discriminator. */
  readonly type: "validation";
  /** The policy version validated (0 before training). */
  readonly step: number;
  /** Its `val/*` metrics. */
  readonly metrics: Readonly<Record<string, number>>;
  /** A few of its rollouts as text (input, output, target), printed under the validation line. */
  readonly examples?: readonly ValidationExample[];
}

/** A checkpoint was saved. */
export interface RunCheckpointEvent {
  /** Discriminator. */
  readonly type: "checkpoint";
  /** The step it holds. */
  readonly step: number;
  /** Its run-state file. */
  readonly path: string;
}

/** Something the user should know (printed as `warning:`). */
export interface RunWarningEvent {
  /** Discriminator. */
  readonly type: "warning";
  /** What happened and what to do. */
  readonly message: string;
}

/** A rollout attempt failed; the same row is in the run folder's `failures.jsonl`. */
export interface RunRolloutFailureEvent {
  /** Discriminator. */
  readonly type: "rollout_failure";
  /** What failed, how, and what the failure policy did (secrets redacted). */
  readonly failure: FailureRow;
  /** True for the first failure of its kind in this session, unless it stops the run (the run's error reports that one); the console shows only these. */
  readonly firstOfKind: boolean;
}

/** The run ended. */
export interface RunEndEvent {
  /** Discriminator. */
  readonly type: "end";
  /** Steps completed. */
  readonly step: number;
  /** Why it ended. */
  readonly reason: StopReason;
}

/** What {@link runRecipe} returns. */
export interface RunResult {
  /** The run's output folder. */
  outputDir: string;
  /** Training steps completed (counting those before a resume). */
  steps: number;
  /** Every row of `metrics.jsonl`, in order. */
  metrics: MetricsRow[];
  /** The run-state file of the last checkpoint, if any was saved. */
  lastCheckpoint: string | undefined;
  /** Why the run ended. */
  stopReason: StopReason;
  /** What the metrics say about the run: first → last figures, best validation, tokens and costs, failures. */
  summary: RunSummary;
  /** Where the run's outputs are. */
  outputs: RunOutputs;
  /** The warm start `init:` gave a fresh run, if any. */
  init?: RunInit;
}

/** A metric's value at a step. */
export interface StepValue {
  /** The step. */
  step: number;
  /** The value. */
  value: number;
}

/** First and last value of a metric over the steps that have it. */
export interface FirstLast {
  /** The metric. */
  key: string;
  /** Its first value and step. */
  first: StepValue;
  /** Its last value and step. */
  last: StepValue;
  /** Its highest value and step (the best validation, for `val/reward_mean`). */
  max: StepValue;
}

/** A figure of the run's accounting (`tokens/*`, `cost/*`). */
export interface AccountingFigure {
  /** The metric: a running total (`…_total`, `…total…`, `…cumulative…`: its last value), or per step (summed). */
  key: string;
  /** The figure for the whole run. */
  value: number;
  /** True when `key` is a running total. */
  running: boolean;
}

/** A count of failed or skipped work over the run. */
export interface ProblemCount {
  /** The metric counted (`rollout/failed`, …). */
  key: string;
  /** What it counts, in words (`failed rollouts`). */
  label: string;
  /** Its sum over the steps. */
  count: number;
}

/** What a run's metrics say about it as a whole. */
export interface RunSummary {
  /** The last step with metrics (0 when none was trained). */
  lastStep: number;
  /** `trainer.total_train_steps`, when known. */
  totalSteps: number | undefined;
  /** Seconds of the steps (`time/step_s`) and of the validation before training. */
  wallSeconds: number;
  /** Reward, loss and validation reward first → last, each when the run has it. */
  trends: FirstLast[];
  /** The step of the highest `val/reward_mean`, when the run validated. */
  bestValidation: StepValue | undefined;
  /** Token and cost figures, when the run recorded them (per-step keys with a running total show the total only). */
  accounting: AccountingFigure[];
  /** Failed and skipped work with a count above 0. */
  problems: ProblemCount[];
}

/** Where a run's outputs are, as {@link RunResult.outputs} lists them. */
export interface RunOutputs {
  /** The run folder. */
  runDir: string;
  /** The recipe file the run was started from. */
  recipe: string;
  /** `metrics.jsonl`: one row per step. */
  metrics: string;
  /** `samples.jsonl`: a few decoded trajectories per step. */
  samples: string;
  /** The folder of the checkpoints (run states). */
  checkpoints: string;
  /** `failures.jsonl` and its rows, when a rollout failed. */
  failures:
    | {
        /** The file. */
        path: string;
        /** Its rows (failed rollout attempts, of every session). */
        rows: number;
      }
    | undefined;
  /** Whether `nexrl sample` finds weights of the last step: a checkpoint of it, or the local engine's sampler snapshot. */
  sampleable: boolean;
  /**
   * What `nexrl export` makes of the last step: `both` (Hugging Face and GGUF files of a local
   * engine's model), `peft` (the LoRA adapter of a Tinker checkpoint), or undefined when it has
   * nothing to export (no weights kept, or a backend it does not export from).
   */
  exportFormat: "both" | "peft" | undefined;
}
