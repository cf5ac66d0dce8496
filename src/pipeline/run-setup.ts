/**
 * Setting up a run: the training client, tokenizer, data, workers, trainer, resume state, weight
 * sync and the run's logs, from the recipe — everything the loop in `training-run.ts` works on.
 * @module
 */
import { join } from "node:path";
import type { LoadedRecipe } from "../recipe/load.js";
import { redactSecrets, redactValue } from "../recipe/redact.js";
import { SamplerInferenceClient } from "../services/inference/sampler-inference.js";
import type { TrainingClient, TrainingService } from "../contracts/training.js";
import type { Tokenizer } from "../types/tokenizer.js";
import type { RunAccounting } from "./accounting.js";
import { type RunState } from "./checkpoint.js";
import type { DataLoader } from "./data/data-loader.js";
import type { MetricsRow, RunEvent } from "./events.js";
import { FailureLog } from "./failures.js";
import { JsonlLog } from "./jsonl-log.js";
import { checkLoggerSettings, openRunLoggers, type RunLoggers } from "./loggers/index.js";
import { TrajectoryPool } from "./pool.js";
import type { RunSettings } from "./resume-settings.js";
import { trainerSettings, workerSettings } from "./settings.js";
import { openRewardModel } from "./rewards/reward-model.js";
import { failurePolicyFromRecipe } from "./rollout/failure-policy.js";
import type { RolloutFailure, RolloutRunner } from "./rollout/runner.js";
import { type SampleRow } from "./samples.js";
import { RolloutScheduler } from "./scheduler.js";
import { checkCheckpointModel, checkContextLength, prepareRun, tokenizerName, type PreparedRun } from "./preflight.js";
import { openTrainingService } from "./services.js";
import { createRunner } from "./setup.js";
import type { DistributedRun } from "./distributed/driver-parts.js";
import type { Trainer } from "../contracts/trainer.js";
import { Validator } from "./validation.js";
import { forwardTargetScorer } from "./validation-nll.js";
import { WeightSync } from "./weight-sync.js";
/** How a run starts: fresh, continuing a checkpoint exactly, or from a checkpoint's weights only. */
export type StartPlan =
  | { readonly kind: "fresh" }
  | { readonly kind: "resume"; readonly state: RunState; readonly path: string }
  | { readonly kind: "warm_start"; readonly state: RunState; readonly path: string };

/** Options of `executeRun`: the recipe, where the run writes, how it starts. */
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
  /** Removes secrets from text written to files and events. */
  redact(text: string): string;
  /** The settings checkpoints record, for resumes to compare. */
  settings: RunSettings;
  /** Called once the recipe, its data and its classes have been checked, before the run writes its first file. */
  beforeWrites?(): Promise<void>;
  /** The classes, tokenizer and data `prepareRun` opened (else opened from the recipe). */
  prepared?: PreparedRun;
  /** The training service to run against instead of the recipe's backend (the pipeline benchmark's timed fakes); closed at the end. */
  service?: TrainingService;
}

/** A step number as checkpoint names write it (six digits). */
export const pad = (step: number): string => String(step).padStart(6, "0");
/** Seconds the service keeps the snapshot of the starting weights, the KL reference of the whole run (a week). */
const REFERENCE_TTL_SECONDS = 7 * 24 * 3600;
/** Sampler snapshot names are unique per output folder: later sessions add `-s<n>`. */
export const sessionSuffix = (session: number): string => (session === 0 ? "" : `-s${session}`);

/** Everything a run holds. */
export interface RunParts {
  client: TrainingClient;
  tokenizer: Tokenizer;
  loader: DataLoader;
  runner: RolloutRunner;
  pool: TrajectoryPool;
  scheduler: RolloutScheduler;
  trainer: Trainer;
  weightSync: WeightSync;
  validator: Validator | undefined;
  metrics: JsonlLog<MetricsRow>;
  /** The loggers of `logger.backend` that take each metrics row too. */
  loggers: RunLoggers;
  samples: JsonlLog<SampleRow>;
  failures: FailureLog;
  /** Every runner of the run (training, and validation if any). */
  runners: RolloutRunner[];
  initialSamplerPath: string;
  /** The policy version rollouts may use; read by the runners. */
  versions: { released: number };
  /** The `tokens/*` and `cost/*` metrics. */
  accounting: RunAccounting;
  /** The Redis queue and inference relay of `rollout_worker.distributed`; closed by the run. */
  distributed: DistributedRun | undefined;
}

/**
 * The training service of the run: the one given in the options, else the recipe's backend.
 */
export function openRunService(options: ExecuteRunOptions): TrainingService {
  const { config } = options.recipe;
  if (options.service) return options.service;
  return openTrainingService(config, {
    outputDir: options.outputDir,
    env: options.env,
    log: (message) => options.emit({ type: "warning", message }),
  });
}

/**
 * Builds the parts of a run: everything that can refuse the recipe (the model's context, the
 * checkpoint's model, the data, the worker and trainer classes) comes before the first file is
 * written; then the checkpoint's state is loaded, the sampler chosen and the logs opened.
 * @param onFailure receives every failed rollout attempt.
 */
export async function setUpRun(
  options: ExecuteRunOptions,
  service: TrainingService,
  stopSignal: AbortSignal,
  accounting: RunAccounting,
  onFailure: (failure: RolloutFailure) => void,
): Promise<RunParts> {
  const { recipe, start } = options;
  const config = recipe.config;
  const train = config.service.train_service;
  const prepared = options.prepared ?? (await prepareRun(recipe, stopSignal));
  const { tokenizer, classes } = prepared;
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
  // A remote service tells its model's context only now.
  const maxSequenceLength = checkContextLength(config, info.contextLength);
  if (start.kind !== "fresh") checkCheckpointModel(config, start.state, start.path);
  // The workers' reward model (judge_mode reward_model): a path the service cannot open stops here.
  await openRewardModel(workerSettings(config), service, tokenizer, recipe.path);
  // Everything that can refuse the recipe comes before the first file is written.
  const { train: loader, validation: validationLoader } = prepared.loaders;
  const workerClass = classes.worker;
  const trainerClass = classes.trainer;
  checkLoggerSettings(config.logger, options.env);
  await options.beforeWrites?.();
  if (start.kind !== "fresh") {
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
  const needsInference = config.rollout_worker.need_llm_inference || validationLoader !== undefined;
  const settings = config.rollout_worker.distributed;
  // Imported only here: a run in one process never loads the Redis client.
  const distributed =
    settings &&
    (await (
      await import("./distributed/driver-parts.js")
    ).DistributedRun.open(
      settings,
      needsInference ? inference : undefined,
      (error) => options.emit({ type: "warning", message: options.redact(error.message) }),
      {
        temperature: config.rollout_worker.temperature,
        max_response_length: config.rollout_worker.max_response_length,
      },
      await (await import("./distributed/fingerprint.js")).runFingerprint(config, recipe.dir, tokenizerName(config)),
    ));
  try {
    const runnerParts = {
      workerClass,
      workerOptions: prepared.options.worker,
      tokenizer,
      service,
      policy,
      maxSequenceLength,
      ...(info.vocabSize !== undefined && { vocabSize: info.vocabSize }),
      currentVersion: () => versions.released,
      signal: stopSignal,
      onFailure,
    };
    const runner = createRunner(config, {
      ...runnerParts,
      namePrefix: "rollout_worker",
      inference: config.rollout_worker.need_llm_inference ? inference : undefined,
      ...(distributed && { remote: distributed.training(config.rollout_worker.need_llm_inference) }),
    });
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
    const runners = [runner];
    let validator: Validator | undefined;
    if (validationLoader) {
      const validationRunner = createRunner(config, {
        ...runnerParts,
        namePrefix: "validation_worker",
        inference,
        ...(distributed && { remote: distributed.validation() }),
      });
      runners.push(validationRunner);
      validator = new Validator(validationLoader, validationRunner, {
        scoreTargets: forwardTargetScorer(client, service.backend),
      });
    }
    const trainer = new trainerClass({
      settings: trainerSettings(config),
      service,
      trainingClient: client,
      tokenizer,
      initialSamplerPath,
      warn: (message) => options.emit({ type: "warning", message }),
      options: prepared.options.trainer,
    });
    const warn = (message: string): void => options.emit({ type: "warning", message });
    const metrics = await JsonlLog.open<MetricsRow>(join(options.outputDir, "metrics.jsonl"), resume?.step, warn);
    if (resume) accounting.restore(metrics.rows.at(-1));
    const samples = await JsonlLog.open<SampleRow>(join(options.outputDir, "samples.jsonl"), resume?.step, warn);
    const failures = await FailureLog.open(
      join(options.outputDir, "failures.jsonl"),
      resume?.step,
      options.redact,
      warn,
    );
    // Opened last: nothing after them can fail and leave a remote run open.
    const loggers = await openRunLoggers(config.logger, {
      outputDir: options.outputDir,
      config: redactValue(redactSecrets(config, options.env), options.redact),
      firstStep: resume ? resume.step + 1 : 0,
      resumed: resume !== undefined,
      earlierRows: resume ? [...metrics.rows] : [],
      env: options.env,
      warn,
    });
    return {
      client,
      tokenizer,
      loader,
      runner,
      pool,
      scheduler,
      trainer,
      weightSync: new WeightSync(service, inference, sampler),
      validator,
      metrics,
      loggers,
      samples,
      failures,
      runners,
      initialSamplerPath,
      versions,
      accounting,
      distributed,
    };
  } catch (error) {
    await distributed?.close();
    throw error;
  }
}
