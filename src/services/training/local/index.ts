/**
 * The `local` backend: the embedded CPU engine behind the training-service interfaces, so the
 * pipeline and `nexrl serve` use it without knowing it is local.
 *
 * @module
 */
import { LocalEngine, type ComputeOptions, type LocalSampler } from "../../../engine/index.js";
import { MODEL_PRESETS, type ModelPresetName } from "../../../engine/config.js";
import type { LossFunctionName } from "../../../contracts/losses.js";
import { forwardBackwardCustom, type CustomLossFn } from "../custom-loss.js";
import { modelInputTokens, type AdamParams, type Datum, type ModelInput } from "../../../types/wire.js";
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
} from "../types.js";

/** Options of {@link LocalTrainingService}: where files go, the default seed, and `threads` and `kernels` of its engines. */
export interface LocalTrainingServiceOptions extends ComputeOptions {
  /** Folder for checkpoints and sampler snapshots (the run's output folder). */
  outputDir: string;
  /** Default seed of the models' initial weights (0). */
  seed?: number;
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

/** A {@link SamplingClient} over one {@link LocalSampler}. */
class LocalSamplingClient implements SamplingClient {
  private readonly queue = new OrderedQueue();

  constructor(
    readonly modelPath: string,
    private readonly sampler: Pick<LocalSampler, "sampleAsync" | "computeLogprobs">,
  ) {}

  sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>> {
    return this.queue.submit(() => this.sampler.sampleAsync(modelInputTokens(prompt), params, numSamples));
  }

  async computeLogprobs(tokens: number[]): Promise<Array<number | null>> {
    return (await this.queue.submit(() => this.sampler.computeLogprobs(tokens))).result();
  }
}

/** A {@link TrainingClient} over a {@link LocalEngine}. */
class LocalTrainingClient implements TrainingClient {
  private readonly queue = new OrderedQueue();

  constructor(
    readonly modelId: string,
    private readonly baseModel: string,
    private readonly engine: LocalEngine,
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
 * waits for it.
 */
export class LocalTrainingService implements TrainingService {
  /** Always `local`. */
  readonly backend = "local" as const;
  private models = 0;
  private readonly engines: LocalEngine[] = [];

  /** @param options where files go, the default seed, threads and kernels. */
  constructor(private readonly options: LocalTrainingServiceOptions) {}

  /** Nothing to connect to: resolves at once. */
  async connect(): Promise<void> {}

  /** Creates a model from an engine preset. LoRA settings do not apply: the local engine trains every weight. */
  async createTrainingClient(options: CreateTrainingClientOptions): Promise<TrainingClient> {
    const engine = this.createEngine(options.baseModel, options.seed);
    return new LocalTrainingClient(`local:${options.baseModel}:${this.models++}`, options.baseModel, engine);
  }

  /** Opens a sampler on a snapshot file, or on the untrained preset `path`. */
  async createSamplingClient(path: string): Promise<SamplingClient> {
    const sampler = isPreset(path)
      ? this.createEngine(path)
      : await LocalEngine.samplerFromSnapshot(path, this.compute());
    return new LocalSamplingClient(path, sampler);
  }

  /**
   * Releases the threads of the engines it created (files stay in the output folder); snapshot
   * samplers release theirs when they are garbage-collected.
   */
  async close(): Promise<void> {
    await Promise.all(this.engines.splice(0).map((e) => e.close()));
  }

  private compute(): ComputeOptions {
    const { threads, kernels } = this.options;
    return { ...(threads !== undefined && { threads }), ...(kernels !== undefined && { kernels }) };
  }

  private createEngine(model: string, seed = this.options.seed): LocalEngine {
    const engine = LocalEngine.create({
      model: model as ModelPresetName,
      outputDir: this.options.outputDir,
      ...(seed !== undefined && { seed }),
      ...this.compute(),
    });
    this.engines.push(engine);
    return engine;
  }
}
