/**
 * One run of the training loop: services, rollouts, training steps, weight sync, validation,
 * metrics and checkpoints.
 * @module
 */
import { redactValue } from "../recipe/redact.js";
import type { TrainingService } from "../contracts/training.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { RunAccounting, TokenMeter } from "../outputs/accounting.js";
import type { RunStatus } from "../outputs/loggers/types.js";
import { summarizeMetrics } from "../outputs/run-summary.js";
import { pruneSamplerSnapshots, removeRunState, writeRunState, type RunState } from "../outputs/checkpoint.js";
import type { DataCursor } from "../data/data-loader.js";
import type { MetricsRow, RunResult, StopReason } from "../outputs/events.js";
import { type PoolState } from "../rollouts/pool.js";
import { shownValue, type RolloutFailure } from "../rollouts/runner.js";
import { runGuarded, type GuardedRun } from "../rollouts/run-guard.js";
import { sampleRows, validationSampleRows } from "../outputs/samples.js";
import { describeTask } from "../contracts/task.js";
import { summarize } from "../algorithms/stats.js";
import { type SamplerState } from "../rollouts/weight-sync.js";
import { Halted, RunError, UserCodeError } from "../errors.js";
import type { ScheduledBatch } from "../rollouts/scheduler.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import type { TrainStepResult } from "../contracts/trainer.js";
import {
  openRunService,
  pad,
  sessionSuffix,
  setUpRun,
  type ExecuteRunOptions,
  type RolloutSide,
  type RunOutputs,
  type RunParts,
  type TrainingSide,
} from "./run-setup.js";

const seconds = (from: number): number => (performance.now() - from) / 1000;

/** What {@link executeRun} returns: a {@link RunResult} but for what `runRecipe` adds from the run folder. */
export type LoopResult = Omit<RunResult, "summary" | "outputs">;

/**
 * Runs the training loop of a recipe to its end (or an abort) and returns what it did. A run that
 * stops on an error (a rollout failure the policy does not skip, a step with no successful
 * rollout, an uncaught error in user code, a hang) first saves a checkpoint of the last finished
 * step when it can (see {@link TrainingRun.rescue}).
 */
export async function executeRun(options: ExecuteRunOptions): Promise<LoopResult> {
  const { config } = options.recipe;
  const meter = new TokenMeter();
  const service = meter.wrap(openRunService(options));
  const stop = new AbortController();
  const supervisor = new Supervisor();
  let status: RunStatus = "failed";
  try {
    return await runGuarded(supervisor, async () => {
      await supervisor.race(service.connect());
      const accounting = new RunAccounting(meter, config.accounting.prices);
      const run = await supervisor.race(TrainingRun.create(options, service, stop.signal, accounting));
      supervisor.run = run;
      try {
        const result = await supervisor.race(run.loop());
        status = result.stopReason === "aborted" ? "stopped" : "finished";
        return result;
      } catch (error) {
        run.halt();
        await run.rescue(error, supervisor);
        throw error;
      }
    });
  } finally {
    stop.abort();
    await supervisor.run?.endLoggers(status);
    await supervisor.run?.close();
    await service.close();
  }
}

/**
 * What the process-level guard reports to a run: hung rollouts are ended (the failure policy
 * takes over); a run stalled elsewhere, or an uncaught error outside rollouts, interrupts what
 * the run is waiting for.
 */
class Supervisor implements GuardedRun {
  /** The run, once set up. */
  run: TrainingRun | undefined;
  private interrupt: (error: unknown) => void = () => undefined;

  /** `work`, or the first problem reported while waiting for it (`work` is then left to itself). */
  race<T>(work: Promise<T>): Promise<T> {
    work.catch(() => undefined);
    const interrupted = new Promise<never>((_, reject) => (this.interrupt = reject));
    interrupted.catch(() => undefined);
    return Promise.race([work, interrupted]);
  }

  stalled(): void {
    if (this.run && this.run.endHungRollouts() > 0) return;
    this.interrupt(
      new RunError(
        `the run stopped making progress while ${this.run?.phase ?? "setting up"}: the process had nothing left to wait for (no timer, socket or file operation) while a promise was still pending; look for a promise in user code (a trainer, an evaluator, a worker's constructor) that is never resolved`,
        { code: "stalled" },
      ),
    );
  }

  crashed(error: unknown): void {
    this.interrupt(
      new UserCodeError(
        `an uncaught ${error instanceof Error ? `${error.name}: ${error.message}` : `throw of ${shownValue(error)}`} was raised outside any rollout while ${this.run?.phase ?? "setting up"}`,
        { code: "uncaught", cause: error },
      ),
    );
  }
}

/**
 * The state of a run at the end of a step while no rollout was running: with the weights of that
 * step, everything a checkpoint holds but the training state. A run that must stop before its
 * next step trains saves it (see {@link TrainingRun.rescue}).
 */
interface QuietState {
  step: number;
  sampler: SamplerState;
  data: DataCursor;
  pool: PoolState;
}

/** A run's loop over its three groups of parts (see {@link RunParts}). */
class TrainingRun {
  /** The data, runners, pool and scheduler, and the policy version the rollouts use. */
  private readonly rollouts: RolloutSide;
  /** The training client, the trainer and the weight sync. */
  private readonly training: TrainingSide;
  /** The metrics, loggers, samples and failures the run writes. */
  private readonly outputs: RunOutputs;
  /** Renders the samples. */
  private readonly tokenizer: Tokenizer;
  private step: number;
  private lastCheckpoint: string | undefined;
  private lastCheckpointStep: number | undefined;
  /** What the run is doing, for messages. */
  phase = "starting";
  private halted = false;
  private quiet: QuietState | undefined;

  private constructor(
    private readonly options: ExecuteRunOptions,
    parts: RunParts,
    /** The `tokens/*` and `cost/*` metrics. */
    private readonly accounting: RunAccounting,
  ) {
    ({ rollouts: this.rollouts, training: this.training, outputs: this.outputs, tokenizer: this.tokenizer } = parts);
    this.step = this.rollouts.policyVersion.current;
    // A resumed run's checkpoint is its latest until it saves another (`remove_previous_ckpt` then deletes it).
    if (options.start.kind === "resume")
      [this.lastCheckpoint, this.lastCheckpointStep] = [options.start.path, this.step];
  }

  /** Records a failed rollout attempt in `failures.jsonl` and reports it. */
  private rolloutFailed(failure: RolloutFailure): void {
    const step = failure.task.isVal ? this.step : failure.task.batchIndex + 1;
    const { row, first } = this.outputs.failures.record(failure, step);
    // A failure that stops the run is reported by the run's error.
    this.options.emit({ type: "rollout_failure", failure: row, firstOfKind: first && failure.action !== "stop" });
  }

  /**
   * Ends every rollout in flight as hung (the process has nothing left to do) and says which;
   * returns how many.
   */
  endHungRollouts(): number {
    const hung = this.rollouts.runners.flatMap((runner) => runner.running());
    if (hung.length > 0)
      this.options.emit({
        type: "warning",
        message: `the process had nothing left to wait for while ${this.phase}: ${hung.length === 1 ? "this rollout hangs" : `these ${hung.length} rollouts hang`} and ${hung.length === 1 ? "is" : "are"} ended as failed: ${hung.map((task) => `${task.isVal ? "validation " : ""}${describeTask(task)}`).join(", ")}`,
      });
    for (const runner of this.rollouts.runners) runner.endHung();
    return hung.length;
  }

  /**
   * Tells the loggers how the run ended, with its summary over every metrics row of the folder;
   * remote loggers send what they still hold first (within their flush timeout). Never throws.
   */
  async endLoggers(status: RunStatus): Promise<void> {
    const { config } = this.options.recipe;
    try {
      await this.outputs.loggers.end({
        status,
        summary: summarizeMetrics(
          this.outputs.metrics.rows,
          config.trainer.total_train_steps,
          config.rollout_worker.need_llm_inference,
        ),
      });
    } catch (error) {
      this.options.emit({
        type: "warning",
        message: `the loggers could not record the end of the run: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
  }

  /** Closes what the run holds open besides the service (the Redis queue of a distributed run). */
  async close(): Promise<void> {
    await this.rollouts.distributed?.close();
  }

  /** Stops the loop at its next step boundary: after an error, nothing more is trained. */
  halt(): void {
    this.halted = true;
  }

  private checkHalted(): void {
    if (this.halted) throw new Halted("the run was halted");
  }

  /** Remembers the run's state for {@link TrainingRun.rescue} when no rollout is running. */
  private captureQuiet(): void {
    this.quiet = this.rollouts.scheduler.idle
      ? {
          step: this.step,
          sampler: this.training.weightSync.sampler,
          data: this.rollouts.loader.cursor(),
          pool: this.rollouts.pool.snapshot(),
        }
      : undefined;
  }

  /**
   * After the loop stopped on `error`: writes the logs out and saves a checkpoint of the last
   * finished step, if the weights are still that step's and no rollout was running when it
   * finished (always so in `sync` mode, when the error came before the next step trained), so
   * that a resume continues exactly from there. Reports what it did as a warning; never throws.
   */
  async rescue(error: unknown, supervisor: Supervisor): Promise<void> {
    if (error instanceof Halted) return;
    const warn = (message: string): void => this.options.emit({ type: "warning", message });
    await this.outputs.failures.flush().catch(() => undefined);
    const quiet = this.quiet;
    const resumeFrom =
      this.lastCheckpointStep !== undefined
        ? `a resume (resume.mode=auto) continues from the checkpoint of step ${this.lastCheckpointStep}`
        : "no checkpoint was saved, so a resume starts afresh";
    if (!quiet) {
      const why =
        this.options.recipe.config.weight.sync_mode === "sync"
          ? "the error came while the weights of a new step were being trained or published"
          : `rollouts of later steps were in flight (weight.sync_mode ${this.options.recipe.config.weight.sync_mode})`;
      warn(`the run stopped at step ${this.step} and saved no checkpoint of it (${why}); ${resumeFrom}`);
      return;
    }
    if (quiet.step === this.lastCheckpointStep || quiet.step === 0) {
      warn(`the run stopped at step ${this.step}; ${resumeFrom}`);
      return;
    }
    try {
      this.phase = `saving a checkpoint of step ${quiet.step} after the error`;
      // The weights are still those of the quiet step (see above): a run that samples nothing publishes them now.
      await supervisor.race(this.syncSampler());
      await supervisor.race(this.saveCheckpoint({ ...quiet, sampler: this.training.weightSync.sampler }));
      warn(
        `the run stopped at step ${this.step}: saved a checkpoint of it (${this.lastCheckpoint}); fix the cause and resume with resume.mode=auto`,
      );
    } catch (saving) {
      warn(
        `the run stopped at step ${this.step} and could not save a checkpoint of it: ${this.options.redact(saving instanceof Error ? saving.message : String(saving))}; ${resumeFrom}`,
      );
    }
  }

  /** Sets up the parts of a run (see {@link setUpRun}) and the run over them. */
  static async create(
    options: ExecuteRunOptions,
    service: TrainingService,
    stopSignal: AbortSignal,
    accounting: RunAccounting,
  ): Promise<TrainingRun> {
    // Failures can only come once the loop runs, after the run below exists.
    const failures: { run?: TrainingRun } = {};
    const parts = await setUpRun(options, service, stopSignal, accounting, (failure) =>
      failures.run?.rolloutFailed(failure),
    );
    failures.run = new TrainingRun(options, parts, accounting);
    return failures.run;
  }

  async loop(): Promise<LoopResult> {
    const { config } = this.options.recipe;
    const total = config.trainer.total_train_steps;
    const { signal, emit, start } = this.options;
    emit({
      type: "start",
      outputDir: this.options.outputDir,
      fromStep: this.step,
      totalSteps: total,
      start: start.kind,
      ...(start.kind !== "fresh" && { from: start.path }),
    });
    if (this.step === 0 && this.rollouts.validator && config.validate.validate_before_train) {
      const validation = await this.validate();
      const row = {
        step: 0,
        ...validation.metrics,
        ...this.accounting.row(),
        "time/validation_s": validation.seconds,
      };
      await this.outputs.metrics.append(row);
      await this.outputs.loggers.step(row);
    }
    this.captureQuiet();
    this.release(this.step);
    let reason: StopReason = "completed";
    while (this.step < total) {
      if (signal?.aborted) {
        reason = "aborted";
        break;
      }
      const ended = await this.trainStep(total);
      if (ended === "stranded") {
        await this.saveStranded();
        reason = "aborted";
        break;
      }
      if (ended) {
        reason = ended;
        break;
      }
    }
    if (signal?.aborted) reason = "aborted";
    // The end of a run (a stop included) leaves a checkpoint of its last step unless the recipe opts out.
    if ((reason === "aborted" || config.trainer.save_final) && this.lastCheckpointStep !== this.step && !this.stranded)
      await this.checkpoint();
    await this.outputs.failures.flush();
    emit({ type: "end", step: this.step, reason });
    return {
      outputDir: this.options.outputDir,
      steps: this.step,
      metrics: [...this.outputs.metrics.rows],
      lastCheckpoint: this.lastCheckpoint,
      stopReason: reason,
    };
  }

  /** Allows rollouts on policy `version`. */
  private release(version: number): void {
    this.rollouts.policyVersion.release(version);
    this.rollouts.scheduler.release(version);
  }

  /**
   * Set when the run was stopped while its distributed rollouts waited for workers and none was
   * connected: its step is left unfinished, the last finished one saved (see {@link TrainingRun.saveStranded}).
   */
  private stranded = false;

  /**
   * The batch of the step, or "stranded" when the run is stopped while the step's distributed
   * rollouts wait for workers and none is connected (nothing would ever end the step).
   */
  private async nextBatch(): Promise<ScheduledBatch | undefined | "stranded"> {
    const batch = this.rollouts.scheduler.next(this.step);
    const { signal } = this.options;
    if (!this.rollouts.distributed || !signal) return batch;
    batch.catch(() => undefined);
    return Promise.race([batch, this.rollouts.distributed.stranded(signal).then(() => "stranded" as const)]);
  }

  /**
   * After a stop while no worker was connected: saves the state of the last finished step
   * unless its checkpoint exists (the weights are still that step's: its successor never trained).
   */
  private async saveStranded(): Promise<void> {
    this.stranded = true;
    const quiet = this.quiet;
    const saved =
      quiet && quiet.step !== this.lastCheckpointStep && quiet.step > 0
        ? (await this.saveCheckpoint({ ...quiet, sampler: this.training.weightSync.sampler }),
          ` saved a checkpoint of step ${quiet.step};`)
        : "";
    this.options.emit({
      type: "warning",
      message: `stopped while step ${this.step + 1}'s rollouts waited for workers and none was connected: the step is left unfinished;${saved} resume with resume.mode=auto`,
    });
  }

  /**
   * One training step: the batch's rollouts, training on it, publishing the new weights,
   * validation when due, the step's rows and a checkpoint when due; returns why the run must end,
   * if it must.
   */
  private async trainStep(total: number): Promise<StopReason | "stranded" | undefined> {
    const { config } = this.options.recipe;
    const t0 = performance.now();
    this.phase = `rolling out step ${this.step + 1}`;
    const batch = await this.nextBatch();
    if (batch === "stranded") return batch;
    this.checkHalted();
    if (!batch) return "data_exhausted";
    this.checkSomeRolloutSucceeded(batch.trajectories.length);
    const rolloutSeconds = seconds(t0);
    const t1 = performance.now();
    const metrics: Record<string, number> = {};
    this.phase = `training step ${this.step + 1}`;
    this.quiet = undefined;
    const result = await this.training.trainer.train(batch.trajectories, metrics);
    const trainSeconds = seconds(t1);
    const trainedOn = this.step;
    this.step += 1;
    const t2 = performance.now();
    this.phase = `publishing the weights of step ${this.step}`;
    if (config.rollout_worker.need_llm_inference) await this.syncSampler();
    const syncSeconds = seconds(t2);
    const async = config.weight.sync_mode !== "sync";
    if (async) this.release(this.step);
    const validationSeconds = await this.validateIfDue(metrics);
    const row = await this.stepRow(metrics, batch, trainedOn, t0, {
      "time/rollout_s": rolloutSeconds,
      "time/train_s": trainSeconds,
      "time/sync_s": syncSeconds,
      "time/validation_s": validationSeconds,
    });
    await this.recordStep(row, result, batch);
    const saveFreq = config.trainer.save_freq;
    if ((saveFreq > 0 && (this.step % saveFreq === 0 || this.step === total)) || this.options.signal?.aborted)
      await this.checkpoint();
    this.checkHalted();
    this.captureQuiet();
    // After the last step nothing more is trained: no rollout is started for it.
    if (!async && this.step < total) this.release(this.step);
    return undefined;
  }

  /** Validates the weights of the step when `validate.eval.validate_freq` says so, into `metrics`; returns the seconds it took. */
  private async validateIfDue(metrics: Record<string, number>): Promise<number> {
    const freq = this.options.recipe.config.validate.eval.validate_freq;
    if (!this.rollouts.validator || freq <= 0 || this.step % freq !== 0) return 0;
    this.phase = `validating step ${this.step}`;
    const validation = await this.validate();
    Object.assign(metrics, validation.metrics);
    return validation.seconds;
  }

  /**
   * The metrics row of the step: the trainer's and validation's `metrics`, the workers', the
   * rollouts' counts, the staleness of `batch` against the weights it `trainedOn`, the accounting
   * and the seconds of its phases and of the whole step (begun at `start`).
   */
  private async stepRow(
    metrics: Record<string, number>,
    batch: ScheduledBatch,
    trainedOn: number,
    start: number,
    phaseSeconds: Record<`time/${string}_s`, number>,
  ): Promise<MetricsRow> {
    const counts = this.rollouts.runner.takeCounts();
    const workers = await this.rollouts.distributed?.metrics();
    return {
      step: this.step,
      ...metrics,
      ...workers,
      "rollout/failed": counts.failed,
      "rollout/retried": counts.retried,
      "rollout/timed_out": counts.timedOut,
      "rollout/skipped": counts.skipped,
      "rollout/unknown_token_ids": counts.unknownTokenIds,
      "rollout/groups_dropped": this.rollouts.pool.takeDroppedGroups(),
      "staleness/dropped": batch.staleDropped,
      "staleness/requeued": batch.staleRequeued,
      ...staleness(batch.trajectories, trainedOn),
      ...this.accounting.row(),
      ...phaseSeconds,
      "time/step_s": seconds(start),
    };
  }

  /** Writes the step's failures, metrics `row` and samples out, and reports the step. */
  private async recordStep(row: MetricsRow, result: TrainStepResult, batch: ScheduledBatch): Promise<void> {
    await this.outputs.failures.flush();
    await this.outputs.metrics.append(row);
    await this.outputs.loggers.step(row);
    for (const sample of sampleRows(
      this.step,
      result.trajectories,
      this.tokenizer,
      this.options.samplesPerStep,
      batch.trajectories,
    ))
      await this.outputs.samples.append(redactValue(sample, this.options.redact));
    this.options.emit({
      type: "step",
      step: this.step,
      metrics: row,
      ...(result.skipReason !== undefined && { skipped: result.skipReason }),
    });
  }

  /**
   * Stops the run when the rollouts of a step all failed and were skipped, leaving `batchSize`
   * (0) trajectories: there is nothing to train on, and a run that went on would only fail again.
   */
  private checkSomeRolloutSucceeded(batchSize: number): void {
    const counts = this.rollouts.runner.counts;
    if (batchSize > 0 || counts.succeeded > 0 || counts.skipped === 0) return;
    const failures = this.outputs.failures;
    throw new RunError(
      `step ${this.step + 1} has no successful rollout: all ${counts.skipped} of its rollouts failed (${counts.failed} failed attempts${counts.timedOut > 0 ? `, ${counts.timedOut} of them timed out or hung` : ""}) and the continue policy skipped them, so there is nothing to train on. ` +
        `The first failure of each kind is shown above; every failure is in ${failures.path}. Fix the cause and resume with resume.mode=auto`,
      { code: "no_successful_rollout" },
    );
  }

  /** Exports the current weights for sampling and points the rollouts at them. */
  private async syncSampler(): Promise<void> {
    if (this.training.weightSync.sampler.version === this.step) return;
    const path = await this.training.trainer.saveSamplerWeights(
      `step_${pad(this.step)}${sessionSuffix(this.options.session)}`,
    );
    await this.training.weightSync.publish(path, this.step);
  }

  private async validate(): Promise<{ metrics: Record<string, number>; seconds: number }> {
    const t0 = performance.now();
    await this.syncSampler();
    const validator = this.rollouts.validator!;
    const metrics = await validator.run(this.step);
    // What the model wrote on validation rows is kept beside the training rows.
    for (const sample of validationSampleRows(
      this.step,
      validator.trajectories,
      this.tokenizer,
      this.options.samplesPerStep,
    ))
      await this.outputs.samples.append(redactValue(sample, this.options.redact));
    this.options.emit({ type: "validation", step: this.step, metrics, examples: validator.examples });
    return { metrics, seconds: seconds(t0) };
  }

  /** Saves weights, optimizer and run state once no rollout is in flight. */
  private async checkpoint(): Promise<void> {
    const phase = this.phase;
    this.phase = `saving the checkpoint of step ${this.step}`;
    await this.rollouts.scheduler.drain();
    // A run that samples nothing (SFT) has not published its weights: the checkpoint's sampler must be this step's.
    await this.syncSampler();
    await this.saveCheckpoint({
      step: this.step,
      sampler: this.training.weightSync.sampler,
      data: this.rollouts.loader.cursor(),
      pool: this.rollouts.pool.snapshot(),
    });
    this.rollouts.scheduler.resume();
    this.phase = phase;
  }

  /** Saves the weights and optimizer, and `quiet` with them as the run state of its step. */
  private async saveCheckpoint(quiet: QuietState): Promise<void> {
    const train = this.options.recipe.config.service.train_service;
    const saved = await (
      await this.training.client.saveState(`step_${pad(quiet.step)}`, { kind: "weights_and_optimizer" })
    ).result();
    const state: RunState = {
      format: "nexrl.run-state",
      version: 2,
      step: quiet.step,
      session: this.options.session,
      trainingState: saved.path,
      sampler: quiet.sampler,
      initialSamplerPath: this.training.initialSamplerPath,
      data: quiet.data,
      pool: quiet.pool,
      seed: this.options.recipe.config.data.seed,
      model: { backend: train.backend, name: train.model },
      settings: this.options.settings,
      savedAt: new Date().toISOString(),
    };
    const previous = this.lastCheckpoint;
    this.lastCheckpoint = await writeRunState(this.options.checkpointDir, state, this.options.outputDir);
    this.lastCheckpointStep = quiet.step;
    if (this.options.recipe.config.trainer.remove_previous_ckpt) {
      if (previous && previous !== this.lastCheckpoint) await removeRunState(previous);
      // A resume needs the sampler its checkpoint records; the earlier steps' snapshots only fill the disk.
      await pruneSamplerSnapshots(this.options.outputDir, [quiet.sampler.path, this.training.weightSync.sampler.path]);
    }
    this.options.emit({ type: "checkpoint", step: quiet.step, path: this.lastCheckpoint });
  }
}

/** `staleness/mean` and `staleness/max`: versions between each trajectory's sampler and the trainer. */
function staleness(trajectories: readonly Trajectory[], trainerVersion: number): Record<string, number> {
  const s = summarize(trajectories.map((t) => trainerVersion - (t.policyVersion ?? trainerVersion)));
  return s ? { "staleness/mean": s.mean, "staleness/max": s.max } : {};
}
