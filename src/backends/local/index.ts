/**
 * The `local` backend: the embedded CPU engine behind the training-service interfaces, so the
 * pipeline and `nexrl serve` use it without knowing it is local.
 *
 * @module
 */
import { LocalEngine, type ComputeOptions, type LocalSampler, type LoraOptions } from "../../engine/index.js";
import { HostedEngine } from "../../engine/engine-host.js";
import { MODEL_PRESETS, type ModelPresetName } from "../../engine/config.js";
import type { LossFunctionName } from "../../contracts/losses.js";
import { forwardBackwardCustom } from "../custom-loss.js";
import type { CustomLossFn } from "../../contracts/training.js";
import { modelInputTokens, type AdamParams, type Datum, type ModelInput } from "../../wire/wire.js";
import type {
  ApiFuture,
  CreateTrainingClientOptions,
  ForwardBackwardOutput,
  ModelInfo,
  OptimStepOutput,
  SampleOutput,
  SamplingClient,
  SamplingParams,
  SavedPath,
  SaveStateOptions,
  TrainingClient,
  TrainingService,
} from "../../contracts/training.js";

/** Options of {@link LocalTrainingService}: where files go, the default seed, and `threads` and `kernels` of its engines. */
export interface LocalTrainingServiceOptions extends ComputeOptions {
  /** Folder for checkpoints and sampler snapshots (the run's output folder). */
  outputDir: string;
  /** Default seed of the models' initial weights (0). */
  seed?: number;
  /**
   * Build each engine and sampler in a worker thread of its own (an engine host), so that the
   * calling thread's event loop keeps running while they compute, as `nexrl serve` does; the
   * results are the same. Default false: they compute on the calling thread, which waits.
   */
  engineHosts?: boolean;
}

/**
 * Runs an operation after every earlier one of the same queue and hands back its future at once,
 * the way a remote service orders a model's requests by `seq_id`.
 */
class OrderedQueue {
  private tail: Promise<unknown> = Promise.resolve();

  submit<T>(operation: () => T | Promise<T>): Promise<ApiFuture<T>> {
    const done = this.tail.then(operation);
    this.tail = done.catch(() => undefined);
    // A caller that never awaits the result must not crash the process with an unhandled rejection.
    done.catch(() => undefined);
    return Promise.resolve({ result: () => done });
  }
}

function isPreset(name: string): name is ModelPresetName {
  return Object.hasOwn(MODEL_PRESETS, name);
}

/** What a {@link LocalSamplingClient} samples with: a sampler or an engine, on this thread or in its host. */
type ClientSampler = Pick<LocalSampler, "sampleAsync" | "computeLogprobs"> | HostedEngine;

/** What a {@link LocalTrainingClient} trains: an engine on this thread or in its host. */
type ClientEngine = LocalEngine | HostedEngine;

/** A {@link SamplingClient} over one {@link LocalSampler}, or a hosted one. */
export class LocalSamplingClient implements SamplingClient {
  private readonly queue = new OrderedQueue();

  constructor(
    readonly modelPath: string,
    private readonly sampler: ClientSampler,
  ) {}

  sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>> {
    return this.queue.submit(() => this.sampler.sampleAsync(modelInputTokens(prompt), params, numSamples));
  }

  async computeLogprobs(tokens: number[]): Promise<Array<number | null>> {
    return (await this.queue.submit(() => this.sampler.computeLogprobs(tokens))).result();
  }

  /** Ends a hosted sampler's host once the calls made so far have run; later calls fail. */
  async close(): Promise<void> {
    const { sampler } = this;
    if (sampler instanceof HostedEngine) await (await this.queue.submit(() => sampler.close())).result();
  }
}

/** A {@link TrainingClient} over a {@link LocalEngine}. */
class LocalTrainingClient implements TrainingClient {
  private readonly queue = new OrderedQueue();

  constructor(
    readonly modelId: string,
    private readonly baseModel: string,
    private readonly engine: ClientEngine,
    private readonly loraRank: number | undefined,
  ) {}

  forward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>> {
    return this.queue.submit(() => this.engine.forward(data, lossFn, lossFnConfig));
  }

  forwardBackward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>> {
    return this.queue.submit(() => this.engine.forwardBackward(data, lossFn, lossFnConfig));
  }

  forwardBackwardCustom(data: Datum[], lossFn: CustomLossFn): Promise<ApiFuture<ForwardBackwardOutput>> {
    return forwardBackwardCustom(this, data, lossFn);
  }

  optimStep(params: AdamParams): Promise<ApiFuture<OptimStepOutput>> {
    return this.queue.submit(() => this.engine.optimStep(params));
  }

  /** Local checkpoints never expire: `ttlSeconds` is accepted and ignored. */
  saveState(name: string, options: SaveStateOptions): Promise<ApiFuture<SavedPath>> {
    return this.queue.submit(async () => ({
      path: await this.engine.saveState(name, { optimizer: options.kind === "weights_and_optimizer" }),
    }));
  }

  loadState(path: string, options: { optimizer: boolean }): Promise<ApiFuture<void>> {
    return this.queue.submit(() => this.engine.loadState(path, options));
  }

  /** Local snapshots never expire: `ttlSeconds` is accepted and ignored. */
  saveWeightsForSampler(name: string): Promise<ApiFuture<SavedPath>> {
    return this.queue.submit(async () => ({ path: await this.engine.saveWeightsForSampler(name) }));
  }

  async getInfo(): Promise<ModelInfo> {
    return {
      modelId: this.modelId,
      baseModel: this.baseModel,
      ...(this.loraRank !== undefined && { loraRank: this.loraRank }),
      tokenizerId: "byte",
      contextLength: this.engine.config.contextLength,
      vocabSize: this.engine.config.vocabSize,
    };
  }
}

/**
 * The embedded engine as a {@link TrainingService}. Base models are engine presets (`tiny`,
 * `small`); sampler paths are the snapshot files `saveWeightsForSampler` writes, or a preset name
 * to sample the untrained model with the service's seed.
 *
 * Operations run one at a time per model, in submission order; each one computes on the engine's
 * threads (`threads`, default: the machine's available parallelism) while the calling thread
 * waits for it, or, with `engineHosts`, in the engine's host thread while the calling thread
 * goes on.
 */
export class LocalTrainingService implements TrainingService {
  /** Always `local`. */
  readonly backend = "local" as const;
  private models = 0;
  private readonly engines: Array<ClientEngine> = [];

  /** @param options where files go, the default seed, threads and kernels. */
  constructor(private readonly options: LocalTrainingServiceOptions) {}

  /** Nothing to connect to: resolves at once. */
  async connect(): Promise<void> {}

  /**
   * Creates a model from an engine preset. It trains every weight, unless `loraRank` is given
   * (without `trainingMode: "full_ft"`): then LoRA factors of that rank (alpha 32) over frozen
   * base weights, as a Tinker model of `nexrl serve` does. Recipes of `backend: local` give no rank.
   * @throws {@link "nexrl".ConfigError | ConfigError} for a rank above the preset's width.
   */
  async createTrainingClient(options: CreateTrainingClientOptions): Promise<TrainingClient> {
    const lora =
      options.loraRank !== undefined && options.trainingMode !== "full_ft" ? { rank: options.loraRank } : undefined;
    const engine = this.createEngine(options.baseModel, options.seed, lora);
    const id = `local:${options.baseModel}:${this.models++}`;
    return new LocalTrainingClient(id, options.baseModel, engine, lora?.rank);
  }

  /** Opens a sampler on a snapshot file, or on the untrained preset `path`. */
  async createSamplingClient(path: string): Promise<SamplingClient> {
    if (isPreset(path)) return new LocalSamplingClient(path, this.createEngine(path));
    if (!this.options.engineHosts)
      return new LocalSamplingClient(path, await LocalEngine.samplerFromSnapshot(path, this.compute()));
    const sampler = await HostedEngine.samplerFromSnapshot(path, this.compute());
    this.engines.push(sampler);
    return new LocalSamplingClient(path, sampler);
  }

  /**
   * Releases the threads of the engines it created (files stay in the output folder), and ends
   * their hosts with `engineHosts`; snapshot samplers on this thread release theirs when they
   * are garbage-collected.
   */
  async close(): Promise<void> {
    await Promise.all(this.engines.splice(0).map((e) => e.close()));
  }

  private compute(): ComputeOptions {
    const { threads, kernels } = this.options;
    return { ...(threads !== undefined && { threads }), ...(kernels !== undefined && { kernels }) };
  }

  private createEngine(model: string, seed = this.options.seed, lora?: LoraOptions): ClientEngine {
    const options = {
      model: model as ModelPresetName,
      outputDir: this.options.outputDir,
      ...(seed !== undefined && { seed }),
      ...(lora && { lora }),
      ...this.compute(),
    };
    const engine = this.options.engineHosts ? HostedEngine.create(options) : LocalEngine.create(options);
    this.engines.push(engine);
    return engine;
  }
}
