/**
 * Setting up a run: the training client, tokenizer, data, workers, trainer, resume state, weight
 * sync and the run's logs, from the recipe — everything the loop in `training-run.ts` works on.
 * @module
 */
import { join } from "node:path";
import type { LoadedRecipe } from "../recipe/load.js";
import { redactSecrets, redactValue } from "../recipe/redact.js";
import { SamplerInferenceClient } from "../inference/sampler-inference.js";
import type { SamplingClient, TrainingClient, TrainingService } from "../contracts/training.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import type { RunAccounting } from "../outputs/accounting.js";
import { type RunState } from "../outputs/checkpoint.js";
import type { DataLoader } from "../data/data-loader.js";
import type { MetricsRow, RunEvent } from "../outputs/events.js";
import { FailureLog } from "../outputs/failures.js";
import { JsonlLog } from "../outputs/jsonl-log.js";
import { checkLoggerSettings, openRunLoggers, type RunLoggers } from "../outputs/loggers/index.js";
import { TrajectoryPool } from "../rollouts/pool.js";
import type { RunSettings } from "../outputs/resume-settings.js";
import { trainerSettings, workerSettings } from "../recipe/settings.js";
import { openRewardModel } from "../rewards/reward-model.js";
import { failurePolicyFromRecipe } from "../rollouts/failure-policy.js";
import type { RolloutFailure, RolloutRunner } from "../rollouts/runner.js";
import { type SampleRow } from "../outputs/samples.js";
import { RolloutScheduler } from "../rollouts/scheduler.js";
import { checkCheckpointModel, checkContextLength, prepareRun, tokenizerName, type PreparedRun } from "./preflight.js";
import { openTrainingService } from "./services.js";
import { createRunner } from "./setup.js";
import type { DistributedRun } from "../distributed/driver-parts.js";
import type { Trainer } from "../contracts/trainer.js";
import { Validator } from "../rollouts/validation.js";
import { forwardTargetScorer } from "../rollouts/validation-nll.js";
import { WeightSync, type SamplerState } from "../rollouts/weight-sync.js";
import { PolicyVersion } from "../rollouts/policy-version.js";
import type { StartPlan } from "./init-stage.js";

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

/** What a run writes: its metrics rows (and the loggers that take them too), samples and failures. */
export interface RunOutputs {
  metrics: JsonlLog<MetricsRow>;
  /** The loggers of `logger.backend` that take each metrics row too. */
  loggers: RunLoggers;
  samples: JsonlLog<SampleRow>;
  failures: FailureLog;
}

/** The rollout side of a run: the data, the runners over it, the pool their trajectories wait in, the scheduler between them. */
export interface RolloutSide {
  loader: DataLoader;
  /** The runner of the training rollouts. */
  runner: RolloutRunner;
  /** Every runner of the run (training, and validation if any). */
  runners: RolloutRunner[];
  pool: TrajectoryPool;
  scheduler: RolloutScheduler;
  /** The policy version the runners stamp; the run releases it together with the scheduler's. */
  policyVersion: PolicyVersion;
  /** Validation over `validate.data`, if the recipe has it. */
  validator: Validator | undefined;
  /** The Redis queue and inference relay of `rollout_worker.distributed`; closed by the run. */
  distributed: DistributedRun | undefined;
}

/** The training side of a run: the client of the weights trained, the trainer, the sync of those weights to the sampler. */
export interface TrainingSide {
  client: TrainingClient;
  trainer: Trainer;
  weightSync: WeightSync;
  /** The snapshot of the starting weights, the KL reference of the whole run. */
  initialSamplerPath: string;
}

/** Everything a run holds: its three groups, and the tokenizer its samples are rendered with. */
export interface RunParts {
  tokenizer: Tokenizer;
  rollouts: RolloutSide;
  training: TrainingSide;
  outputs: RunOutputs;
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
  const config = options.recipe.config;
  const prepared = options.prepared ?? (await prepareRun(options.recipe, stopSignal));
  const client = await createClient(config, service);
  const info = await client.getInfo();
  const maxSequenceLength = await checkBeforeWrites(options, service, prepared, info.contextLength);
  const resume = await loadStartState(client, options.start);
  const sampler = await openSampler(options, service, client, resume);
  const inference = new SamplerInferenceClient({
    tokenizer: prepared.tokenizer,
    samplingClient: sampler.client,
    policyVersion: sampler.state.version,
    defaultMaxTokens: config.rollout_worker.max_response_length,
  });
  const distributed = await openDistributed(options, inference, prepared.loaders.validation !== undefined);
  try {
    const rollouts = buildRolloutSide(options, prepared, {
      service,
      client,
      inference,
      distributed,
      resume,
      maxSequenceLength,
      vocabSize: info.vocabSize,
      signal: stopSignal,
      onFailure,
    });
    const training: TrainingSide = {
      client,
      trainer: createTrainer(options, prepared, service, client, sampler.initialPath),
      weightSync: new WeightSync(service, inference, sampler.state),
      initialSamplerPath: sampler.initialPath,
    };
    const outputs = await openRunOutputs(options, resume, accounting);
    return { tokenizer: prepared.tokenizer, rollouts, training, outputs };
  } catch (error) {
    await distributed?.close();
    throw error;
  }
}

/** The training client of the recipe's model, with the LoRA settings of its backend. */
function createClient(config: RecipeConfig, service: TrainingService): Promise<TrainingClient> {
  const train = config.service.train_service;
  return service.createTrainingClient({
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
}

/**
 * The checks of the recipe that need the service (the model's context, which a remote service
 * tells only now, the checkpoint's model, the reward model, the loggers), then `beforeWrites`;
 * returns the longest accepted trajectory.
 */
async function checkBeforeWrites(
  options: ExecuteRunOptions,
  service: TrainingService,
  prepared: PreparedRun,
  contextLength: number | undefined,
): Promise<number | undefined> {
  const { recipe, start } = options;
  const config = recipe.config;
  const maxSequenceLength = checkContextLength(config, contextLength);
  if (start.kind !== "fresh") checkCheckpointModel(config, start.state, start.path);
  // The workers' reward model (judge_mode reward_model): a path the service cannot open stops here.
  await openRewardModel(workerSettings(config), service, prepared.tokenizer, recipe.path);
  checkLoggerSettings(config.logger, options.env);
  await options.beforeWrites?.();
  return maxSequenceLength;
}

/** Loads the checkpoint's weights (and optimizer, on a resume) into `client`; returns the state a resume continues. */
async function loadStartState(client: TrainingClient, start: StartPlan): Promise<RunState | undefined> {
  if (start.kind !== "fresh") {
    await (await client.loadState(start.state.trainingState, { optimizer: start.kind === "resume" })).result();
  }
  return start.kind === "resume" ? start.state : undefined;
}

/** The sampler a run starts on: its state and client, and the snapshot of the starting weights. */
interface StartSampler {
  initialPath: string;
  state: SamplerState;
  client: SamplingClient;
}

/**
 * The resumed checkpoint's sampler, else a snapshot of the starting weights; a resumed sampler
 * whose snapshot expired is replaced by the checkpoint's weights.
 */
async function openSampler(
  options: ExecuteRunOptions,
  service: TrainingService,
  client: TrainingClient,
  resume: RunState | undefined,
): Promise<StartSampler> {
  const suffix = sessionSuffix(options.session);
  const initialPath =
    resume?.initialSamplerPath ??
    (await (await client.saveWeightsForSampler(`initial${suffix}`, { ttlSeconds: REFERENCE_TTL_SECONDS })).result())
      .path;
  let state = resume?.sampler ?? { path: initialPath, version: 0 };
  let samplingClient = await service.createSamplingClient(state.path).catch(() => undefined);
  if (!samplingClient && resume) {
    // The snapshot expired: the checkpoint's weights serve instead (the same weights in sync mode).
    options.emit({
      type: "warning",
      message: `the sampler snapshot ${state.path} of the checkpoint is gone; sampling from the checkpoint's weights instead`,
    });
    state = {
      path: (await (await client.saveWeightsForSampler(`step_${pad(resume.step)}${suffix}`)).result()).path,
      version: resume.step,
    };
  }
  samplingClient ??= await service.createSamplingClient(state.path);
  return { initialPath, state, client: samplingClient };
}

/**
 * The Redis queue and inference relay of `rollout_worker.distributed`, if the recipe has it
 * (`validates`: the run has validation, whose rollouts sample).
 */
async function openDistributed(
  options: ExecuteRunOptions,
  inference: SamplerInferenceClient,
  validates: boolean,
): Promise<DistributedRun | undefined> {
  const { recipe } = options;
  const config = recipe.config;
  const settings = config.rollout_worker.distributed;
  if (!settings) return undefined;
  const needsInference = config.rollout_worker.need_llm_inference || validates;
  // Imported only here: a run in one process never loads the Redis client.
  return (await import("../distributed/driver-parts.js")).DistributedRun.open(
    settings,
    needsInference ? inference : undefined,
    (error) => options.emit({ type: "warning", message: options.redact(error.message) }),
    {
      temperature: config.rollout_worker.temperature,
      max_response_length: config.rollout_worker.max_response_length,
    },
    await (await import("../distributed/fingerprint.js")).runFingerprint(config, recipe.dir, tokenizerName(config)),
  );
}

/** What {@link buildRolloutSide} needs besides the options and what `prepareRun` opened. */
interface RolloutSideParts {
  service: TrainingService;
  client: TrainingClient;
  inference: SamplerInferenceClient;
  distributed: DistributedRun | undefined;
  resume: RunState | undefined;
  maxSequenceLength: number | undefined;
  vocabSize: number | undefined;
  signal: AbortSignal;
  onFailure: (failure: RolloutFailure) => void;
}

/** The runners, pool and scheduler over the training data (restored on a resume), and the validator. */
function buildRolloutSide(options: ExecuteRunOptions, prepared: PreparedRun, parts: RolloutSideParts): RolloutSide {
  const config = options.recipe.config;
  const { service, inference, distributed, resume } = parts;
  const { train: loader, validation: validationLoader } = prepared.loaders;
  const policyVersion = new PolicyVersion(resume?.step ?? 0);
  const policy = failurePolicyFromRecipe(config, options.minGroupSize);
  const runnerParts = {
    workerClass: prepared.classes.worker,
    workerOptions: prepared.options.worker,
    tokenizer: prepared.tokenizer,
    service,
    policy,
    maxSequenceLength: parts.maxSequenceLength,
    ...(parts.vocabSize !== undefined && { vocabSize: parts.vocabSize }),
    currentVersion: () => policyVersion.current,
    signal: parts.signal,
    onFailure: parts.onFailure,
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
      scoreTargets: forwardTargetScorer(parts.client, service.backend),
    });
  }
  return { loader, runner, runners, pool, scheduler, policyVersion, validator, distributed };
}

/** The recipe's trainer over `client`, with `initialSamplerPath` as its reference. */
function createTrainer(
  options: ExecuteRunOptions,
  prepared: PreparedRun,
  service: TrainingService,
  client: TrainingClient,
  initialSamplerPath: string,
): Trainer {
  return new prepared.classes.trainer({
    settings: trainerSettings(options.recipe.config),
    service,
    trainingClient: client,
    tokenizer: prepared.tokenizer,
    initialSamplerPath,
    warn: (message) => options.emit({ type: "warning", message }),
    options: prepared.options.trainer,
  });
}

/**
 * Opens the run's logs (continued after the resumed step) and restores `accounting` from the
 * last metrics row; the loggers open last: nothing after them can fail and leave a remote run open.
 */
async function openRunOutputs(
  options: ExecuteRunOptions,
  resume: RunState | undefined,
  accounting: RunAccounting,
): Promise<RunOutputs> {
  const config = options.recipe.config;
  const warn = (message: string): void => options.emit({ type: "warning", message });
  const metrics = await JsonlLog.open<MetricsRow>(join(options.outputDir, "metrics.jsonl"), resume?.step, warn);
  if (resume) accounting.restore(metrics.rows.at(-1));
  const samples = await JsonlLog.open<SampleRow>(join(options.outputDir, "samples.jsonl"), resume?.step, warn);
  const failures = await FailureLog.open(join(options.outputDir, "failures.jsonl"), resume?.step, options.redact, warn);
  const loggers = await openRunLoggers(config.logger, {
    outputDir: options.outputDir,
    config: redactValue(redactSecrets(config, options.env), options.redact),
    firstStep: resume ? resume.step + 1 : 0,
    resumed: resume !== undefined,
    earlierRows: resume ? [...metrics.rows] : [],
    env: options.env,
    warn,
  });
  return { metrics, loggers, samples, failures };
}
