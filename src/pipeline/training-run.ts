/**
 * One run of the training loop: services, rollouts, training steps, weight sync, validation,
 * metrics and checkpoints.
 * @module
 */
import { join } from "node:path";
import type { LoadedRecipe } from "../recipe/load.js";
import { SamplerInferenceClient } from "../services/inference/sampler-inference.js";
import type { TrainingClient, TrainingService } from "../services/training/types.js";
import type { Tokenizer } from "../types/tokenizer.js";
import type { Trajectory } from "../types/trajectory.js";
import { removeRunState, writeRunState, type RunState } from "./checkpoint.js";
import type { DataLoader } from "./data/data-loader.js";
import { RunSetupError } from "./errors.js";
import type { MetricsRow, RunEvent, RunResult, StopReason } from "./events.js";
import { JsonlLog } from "./jsonl-log.js";
import { TrajectoryPool } from "./pool.js";
import { failurePolicyFromRecipe } from "./rollout/failure-policy.js";
import type { RolloutRunner } from "./rollout/runner.js";
import { sampleRows, type SampleRow } from "./samples.js";
import { RolloutScheduler } from "./scheduler.js";
import { checkInferenceBackend, openTokenizer, openTrainingService } from "./services.js";
import { createRunner, openDataLoader } from "./setup.js";
import { summarize } from "./stats.js";
import type { RemoteApiTrainer } from "./trainers/remote-api-trainer.js";
import { resolveTrainerClass } from "./trainers/registry.js";
import { Validator } from "./validation.js";
import { WeightSync } from "./weight-sync.js";
import { resolveRolloutWorkerClass } from "./workers/registry.js";

/** How a run starts: fresh, continuing a checkpoint exactly, or from a checkpoint's weights only. */
export type StartPlan =
  | { readonly kind: "fresh" }
  | { readonly kind: "resume"; readonly state: RunState; readonly path: string }
  | { readonly kind: "warm_start"; readonly state: RunState; readonly path: string };

/** Options of {@link executeRun}. */
export interface ExecuteRunOptions {
  /** The loaded recipe. */
  recipe: LoadedRecipe;
  /** The run's output folder (created). */
  outputDir: string;
  /** Where run-state files go. */
  checkpointDir: string;
  /** How the run starts. */
  start: StartPlan;
  /** Number of earlier sessions in this output folder (names sampler snapshots uniquely). */
  session: number;
  /** Stops the run after the step in flight, with a checkpoint. */
  signal: AbortSignal | undefined;
  /** Receives events. */
  emit(event: RunEvent): void;
  /** Trajectories per step written to `samples.jsonl`. */
  samplesPerStep: number;
  /** Minimum productive rollouts per group under the skip policy (default: see `failurePolicyFromRecipe`). */
  minGroupSize: number | undefined;
  /** Environment of the services' `TINKER_*` / `WEAVER_*` fallbacks. */
  env: Readonly<Record<string, string | undefined>>;
  /** The training service to run against instead of the recipe's backend (the pipeline benchmark's timed fakes); closed at the end. */
  service?: TrainingService;
}

const pad = (step: number): string => String(step).padStart(6, "0");
const seconds = (from: number): number => (performance.now() - from) / 1000;
/** Seconds the service keeps the snapshot of the starting weights, the KL reference of the whole run (a week). */
const REFERENCE_TTL_SECONDS = 7 * 24 * 3600;
/** Sampler snapshot names are unique per output folder: later sessions add `-s<n>`. */
const sessionSuffix = (session: number): string => (session === 0 ? "" : `-s${session}`);

/** Runs the training loop of a recipe to its end (or an abort) and returns what it did. */
export async function executeRun(options: ExecuteRunOptions): Promise<RunResult> {
  const { config } = options.recipe;
  checkInferenceBackend(config);
  const service =
    options.service ??
    openTrainingService(config, {
      outputDir: options.outputDir,
      env: options.env,
      log: (message) => options.emit({ type: "warning", message }),
    });
  const stop = new AbortController();
  try {
    await service.connect();
    const run = await TrainingRun.create(options, service, stop.signal);
    return await run.loop();
  } finally {
    stop.abort();
    await service.close();
  }
}

/** Everything a run holds. */
interface RunParts {
  client: TrainingClient;
  tokenizer: Tokenizer;
  loader: DataLoader;
  runner: RolloutRunner;
  pool: TrajectoryPool;
  scheduler: RolloutScheduler;
  trainer: RemoteApiTrainer;
  weightSync: WeightSync;
  validator: Validator | undefined;
  metrics: JsonlLog<MetricsRow>;
  samples: JsonlLog<SampleRow>;
  initialSamplerPath: string;
  /** The policy version rollouts may use; read by the runners. */
  versions: { released: number };
}

/** The parts of a run and its loop. */
class TrainingRun {
  private step: number;
  private lastCheckpoint: string | undefined;
  private lastCheckpointStep: number | undefined;

  private constructor(
    private readonly options: ExecuteRunOptions,
    private readonly parts: RunParts,
  ) {
    this.step = parts.versions.released;
    // A resumed run's checkpoint is its latest until it saves another (`remove_previous_ckpt` then deletes it).
    if (options.start.kind === "resume")
      [this.lastCheckpoint, this.lastCheckpointStep] = [options.start.path, this.step];
  }

  static async create(
    options: ExecuteRunOptions,
    service: TrainingService,
    stopSignal: AbortSignal,
  ): Promise<TrainingRun> {
    const { recipe, start } = options;
    const config = recipe.config;
    const train = config.service.train_service;
    const tokenizer = await openTokenizer(config);
    const client = await service.createTrainingClient({
      baseModel: train.model,
      seed: config.data.seed,
      ...(config.service.tinker_service &&
        train.backend === "tinker" && { loraRank: config.service.tinker_service.lora_rank }),
      ...(config.service.weaver_service &&
        train.backend === "weaver" && {
          loraRank: config.service.weaver_service.lora_rank,
          trainingMode: config.service.weaver_service.training_mode,
        }),
    });
    const info = await client.getInfo();
    const maxSequenceLength = config.rollout_worker.max_sequence_length ?? info.contextLength;
    if (info.contextLength !== undefined && maxSequenceLength !== undefined && maxSequenceLength > info.contextLength) {
      throw new RunSetupError(
        `rollout_worker.max_sequence_length (${maxSequenceLength}) is longer than the context of model ${train.model} (${info.contextLength} tokens); lower it, with max_response_length and max_prompt_length to fit`,
      );
    }
    if (start.kind !== "fresh") {
      if (start.state.model.name !== train.model || start.state.model.backend !== train.backend) {
        throw new RunSetupError(
          `the checkpoint ${start.path} holds ${start.state.model.backend} model ${start.state.model.name}, but the recipe trains ${train.backend} model ${train.model}`,
        );
      }
      await (await client.loadState(start.state.trainingState, { optimizer: start.kind === "resume" })).result();
    }
    const resume = start.kind === "resume" ? start.state : undefined;
    const suffix = sessionSuffix(options.session);
    const initialSamplerPath =
      resume?.initialSamplerPath ??
      (await (await client.saveWeightsForSampler(`initial${suffix}`, { ttlSeconds: REFERENCE_TTL_SECONDS })).result())
        .path;
    let sampler = resume?.sampler ?? { path: initialSamplerPath, version: 0 };
    let samplingClient = await service.createSamplingClient(sampler.path).catch(() => undefined);
    if (!samplingClient && resume) {
      // The snapshot expired: the checkpoint's weights serve instead (the same weights in sync mode).
      options.emit({
        type: "warning",
        message: `the sampler snapshot ${sampler.path} of the checkpoint is gone; sampling from the checkpoint's weights instead`,
      });
      sampler = {
        path: (await (await client.saveWeightsForSampler(`step_${pad(resume.step)}${suffix}`)).result()).path,
        version: resume.step,
      };
    }
    samplingClient ??= await service.createSamplingClient(sampler.path);
    const inference = new SamplerInferenceClient({
      tokenizer,
      samplingClient,
      policyVersion: sampler.version,
      defaultMaxTokens: config.rollout_worker.max_response_length,
    });
    const versions = { released: resume?.step ?? 0 };
    const policy = failurePolicyFromRecipe(config, options.minGroupSize);
    const workerClass = await resolveRolloutWorkerClass(config, recipe.dir, recipe.path, stopSignal);
    const runnerParts = {
      workerClass,
      tokenizer,
      policy,
      maxSequenceLength,
      currentVersion: () => versions.released,
      signal: stopSignal,
    };
    const runner = createRunner(config, {
      ...runnerParts,
      namePrefix: "rollout_worker",
      inference: config.rollout_worker.need_llm_inference ? inference : undefined,
    });
    const loader = await openDataLoader(config.data, tokenizer, false);
    const { sync_mode: mode, staleness_threshold: threshold } = config.weight;
    const stalenessThreshold = mode === "sync" ? 0 : threshold;
    const pool = new TrajectoryPool({
      readiness: config.trajectory_pool.check_batch_ready_function,
      batchSize: config.trajectory_pool.batch_size,
      stalenessThreshold,
      minGroupSize: policy.mode === "skip" ? policy.minGroupSize : 1,
    });
    if (resume) {
      loader.restore(resume.data);
      pool.restore(resume.pool, (saved) => loader.groupOf(saved));
    }
    const scheduler = new RolloutScheduler({
      loader,
      runner,
      pool,
      mode: mode === "fully-async" ? "stream" : "batches",
      lookahead: stalenessThreshold,
      batchSize: config.trajectory_pool.batch_size,
    });
    const validationData = config.validate.data;
    const validator =
      validationData && (config.validate.validate_before_train || config.validate.eval.validate_freq > 0)
        ? new Validator(
            await openDataLoader(validationData, tokenizer, true),
            createRunner(config, { ...runnerParts, namePrefix: "validation_worker", inference }),
          )
        : undefined;
    const trainerClass = await resolveTrainerClass(config, recipe.dir, recipe.path);
    const trainer = new trainerClass({
      recipe: config,
      service,
      trainingClient: client,
      tokenizer,
      initialSamplerPath,
      warn: (message) => options.emit({ type: "warning", message }),
    });
    return new TrainingRun(options, {
      client,
      tokenizer,
      loader,
      runner,
      pool,
      scheduler,
      trainer,
      weightSync: new WeightSync(service, inference, sampler),
      validator,
      metrics: await JsonlLog.open<MetricsRow>(join(options.outputDir, "metrics.jsonl"), resume?.step),
      samples: await JsonlLog.open<SampleRow>(join(options.outputDir, "samples.jsonl"), resume?.step),
      initialSamplerPath,
      versions,
    });
  }

  async loop(): Promise<RunResult> {
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
    if (this.step === 0 && this.parts.validator && config.validate.validate_before_train) {
      const validation = await this.validate();
      await this.parts.metrics.append({ step: 0, ...validation.metrics, "time/validation_s": validation.seconds });
    }
    this.release(this.step);
    let reason: StopReason = "completed";
    while (this.step < total) {
      if (signal?.aborted) {
        reason = "aborted";
        break;
      }
      const ended = await this.trainStep(total);
      if (ended) {
        reason = ended;
        break;
      }
    }
    if (signal?.aborted) reason = "aborted";
    if (reason === "aborted" && this.lastCheckpointStep !== this.step) await this.checkpoint();
    emit({ type: "end", step: this.step, reason });
    return {
      outputDir: this.options.outputDir,
      steps: this.step,
      metrics: [...this.parts.metrics.rows],
      lastCheckpoint: this.lastCheckpoint,
      stopReason: reason,
    };
  }

  /** Allows rollouts on policy `version`. */
  private release(version: number): void {
    this.parts.versions.released = version;
    this.parts.scheduler.release(version);
  }

  /** One training step; returns why the run must end, if it must. */
  private async trainStep(total: number): Promise<StopReason | undefined> {
    const { config } = this.options.recipe;
    const t0 = performance.now();
    const batch = await this.parts.scheduler.next(this.step);
    if (!batch) return "data_exhausted";
    const rolloutSeconds = seconds(t0);
    const t1 = performance.now();
    const metrics: Record<string, number> = {};
    const result = await this.parts.trainer.train(batch.trajectories, metrics);
    const trainSeconds = seconds(t1);
    const trainedOn = this.step;
    this.step += 1;
    const t2 = performance.now();
    if (config.rollout_worker.need_llm_inference) await this.syncSampler();
    const syncSeconds = seconds(t2);
    const async = config.weight.sync_mode !== "sync";
    if (async) this.release(this.step);
    const freq = config.validate.eval.validate_freq;
    let validationSeconds = 0;
    if (this.parts.validator && freq > 0 && this.step % freq === 0) {
      const validation = await this.validate();
      Object.assign(metrics, validation.metrics);
      validationSeconds = validation.seconds;
    }
    const counts = this.parts.runner.takeCounts();
    const row: MetricsRow = {
      step: this.step,
      ...metrics,
      "rollout/failed": counts.failed,
      "rollout/retried": counts.retried,
      "rollout/timed_out": counts.timedOut,
      "rollout/skipped": counts.skipped,
      "rollout/unknown_token_ids": counts.unknownTokenIds,
      "rollout/groups_dropped": this.parts.pool.takeDroppedGroups(),
      "staleness/dropped": batch.staleDropped,
      "staleness/requeued": batch.staleRequeued,
      ...staleness(batch.trajectories, trainedOn),
      "time/rollout_s": rolloutSeconds,
      "time/train_s": trainSeconds,
      "time/sync_s": syncSeconds,
      "time/validation_s": validationSeconds,
      "time/step_s": seconds(t0),
    };
    await this.parts.metrics.append(row);
    for (const sample of sampleRows(
      this.step,
      result.trajectories,
      this.parts.tokenizer,
      this.options.samplesPerStep,
      batch.trajectories,
    ))
      await this.parts.samples.append(sample);
    this.options.emit({ type: "step", step: this.step, metrics: row });
    const saveFreq = config.trainer.save_freq;
    if ((saveFreq > 0 && (this.step % saveFreq === 0 || this.step === total)) || this.options.signal?.aborted)
      await this.checkpoint();
    if (!async) this.release(this.step);
    return undefined;
  }

  /** Exports the current weights for sampling and points the rollouts at them. */
  private async syncSampler(): Promise<void> {
    if (this.parts.weightSync.sampler.version === this.step) return;
    const path = await this.parts.trainer.saveSamplerWeights(
      `step_${pad(this.step)}${sessionSuffix(this.options.session)}`,
    );
    await this.parts.weightSync.publish(path, this.step);
  }

  private async validate(): Promise<{ metrics: Record<string, number>; seconds: number }> {
    const t0 = performance.now();
    await this.syncSampler();
    const metrics = await this.parts.validator!.run(this.step);
    this.options.emit({ type: "validation", step: this.step, metrics });
    return { metrics, seconds: seconds(t0) };
  }

  /** Saves weights, optimizer and run state once no rollout is in flight. */
  private async checkpoint(): Promise<void> {
    const train = this.options.recipe.config.service.train_service;
    await this.parts.scheduler.drain();
    const saved = await (
      await this.parts.client.saveState(`step_${pad(this.step)}`, { kind: "weights_and_optimizer" })
    ).result();
    const state: RunState = {
      format: "nexrl.run-state",
      version: 1,
      step: this.step,
      session: this.options.session,
      trainingState: saved.path,
      sampler: this.parts.weightSync.sampler,
      initialSamplerPath: this.parts.initialSamplerPath,
      data: this.parts.loader.cursor(),
      pool: this.parts.pool.snapshot(),
      seed: this.options.recipe.config.data.seed,
      model: { backend: train.backend, name: train.model },
      savedAt: new Date().toISOString(),
    };
    const previous = this.lastCheckpoint;
    this.lastCheckpoint = await writeRunState(this.options.checkpointDir, state);
    this.lastCheckpointStep = this.step;
    if (previous && previous !== this.lastCheckpoint && this.options.recipe.config.trainer.remove_previous_ckpt)
      await removeRunState(previous);
    this.options.emit({ type: "checkpoint", step: this.step, path: this.lastCheckpoint });
    this.parts.scheduler.resume();
  }
}

/** `staleness/mean` and `staleness/max`: versions between each trajectory's sampler and the trainer. */
function staleness(trajectories: readonly Trajectory[], trainerVersion: number): Record<string, number> {
  const s = summarize(trajectories.map((t) => trainerVersion - (t.policyVersion ?? trainerVersion)));
  return s ? { "staleness/mean": s.mean, "staleness/max": s.max } : {};
}
