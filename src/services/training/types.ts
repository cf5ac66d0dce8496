/**
 * The interfaces the pipeline sees every training service through: the embedded `local` engine,
 * Tinker-protocol servers and Weaver implement them alike.
 *
 * @module
 */
import type { LossFunctionName } from "../../types/losses.js";
import type { AdamParams, Datum, ModelInput } from "../../types/wire.js";

/** The training-service backends a recipe can name in `service.train_service.backend`. */
export type TrainingBackend = "local" | "tinker" | "weaver";

/**
 * A submitted request. Submitting resolves once the request is queued in order on the service,
 * so a caller can submit `forwardBackward` and `optimStep` back to back and await both later;
 * `result()` awaits the answer.
 */
export interface ApiFuture<T> {
  /** Waits for the service's answer. Rejects with the request's error. */
  result(): Promise<T>;
}

/** Per-datum outputs of `forward` / `forwardBackward`; `logprobs` are the target-token logprobs. */
export interface LossFnOutput {
  /** lp_t of each position's target token. */
  logprobs: number[];
  /** Other per-position outputs a service returns (e.g. `elementwise_loss`). */
  [name: string]: number[];
}

/** Result of `forward` / `forwardBackward`. */
export interface ForwardBackwardOutput {
  /** One entry per datum, in order. */
  lossFnOutputs: LossFnOutput[];
  /** Metrics by `name:reduction` key; always has `loss:sum`. */
  metrics: Record<string, number>;
}

/** Result of `optimStep`. */
export interface OptimStepOutput {
  /** Optimizer metrics (e.g. `grad_norm:mean`), possibly empty. */
  metrics: Record<string, number>;
}

/** A saved checkpoint or sampler snapshot. */
export interface SavedPath {
  /** Where it lives, e.g. `tinker://…/weights/ckpt-1` or a local file path. */
  path: string;
}

/** What a training client reports about its model. */
export interface ModelInfo {
  /** The model id on the service. */
  modelId: string;
  /** The base model the client was created from. */
  baseModel: string;
  /** LoRA rank, when the model is a LoRA adapter. */
  loraRank?: number;
  /** Tokenizer name or path the service reports. */
  tokenizerId?: string;
  /** Longest sequence the model accepts, when known. */
  contextLength?: number;
}

/** Options of {@link TrainingService.createTrainingClient}. */
export interface CreateTrainingClientOptions {
  /** The base model (a Hugging Face name, or a local preset such as `tiny`). */
  baseModel: string;
  /** LoRA rank (Tinker's default is 32); ignored by full fine-tuning. */
  loraRank?: number;
  /** `lora` (default) or `full_ft` (Weaver and the local engine). */
  trainingMode?: "lora" | "full_ft";
  /** Seed of the model's initialisation, where the service honours one. */
  seed?: number;
}

/** Options of {@link TrainingClient.saveState}. */
export interface SaveStateOptions {
  /** `weights` alone, or `weights_and_optimizer` for an exact resume. */
  kind: "weights" | "weights_and_optimizer";
  /** Seconds before the service may delete it; omitted keeps it. */
  ttlSeconds?: number;
}

/** Sampling parameters, Tinker's names in camelCase. */
export interface SamplingParams {
  /** Most tokens to generate. */
  maxTokens: number;
  /** Softmax temperature; 0 samples greedily. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass; 1 disables it. */
  topP?: number;
  /** Keep the k most likely tokens; -1 or 0 disables it. */
  topK?: number;
  /** Stop strings or stop token ids. */
  stop?: string[] | number[];
  /** Seed: the same seed gives the same samples. */
  seed?: number;
}

/** One sampled continuation. */
export interface SampledSequence {
  /** Generated token ids (the stop token included when one stopped it). */
  tokens: number[];
  /** Logprob of each generated token under the sampling weights. */
  logprobs: number[];
  /** Why generation ended; `abort` only on Weaver after a pause. */
  stopReason: "stop" | "length" | "abort";
}

/** Result of {@link SamplingClient.sample}. */
export interface SampleOutput {
  /** `numSamples` sequences. */
  sequences: SampledSequence[];
}

/** Samples from one set of weights (a base model or a sampler snapshot). */
export interface SamplingClient {
  /** The sampler path or base model it serves. */
  readonly modelPath: string;
  /** Submits a sampling request for `numSamples` continuations of `prompt`. */
  sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>>;
  /** Logprob of each token of `tokens` given the tokens before it; index 0 is `null`. */
  computeLogprobs(tokens: number[]): Promise<Array<number | null>>;
}

/** Trains one model: loss passes, optimizer steps, checkpoints and sampler snapshots. */
export interface TrainingClient {
  /** The model id on the service. */
  readonly modelId: string;
  /** Computes the loss and per-token logprobs without touching gradients. */
  forward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>>;
  /** Computes the loss and accumulates its gradients until the next `optimStep`. */
  forwardBackward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>>;
  /** Applies the accumulated gradients (AdamW) and clears them. */
  optimStep(params: AdamParams): Promise<ApiFuture<OptimStepOutput>>;
  /** Saves the weights, or weights and optimizer state, under `name`. */
  saveState(name: string, options: SaveStateOptions): Promise<ApiFuture<SavedPath>>;
  /** Restores a state saved by `saveState`; `optimizer` restores the Adam moments too. */
  loadState(path: string, options: { optimizer: boolean }): Promise<ApiFuture<void>>;
  /** Snapshots the current weights for sampling and returns the snapshot's path. */
  saveWeightsForSampler(name: string, options?: { ttlSeconds?: number }): Promise<ApiFuture<SavedPath>>;
  /** What the service reports about the model. */
  getInfo(): Promise<ModelInfo>;
}

/** A connection to a training service. */
export interface TrainingService {
  /** Which backend this is. */
  readonly backend: TrainingBackend;
  /** Opens the session (idempotent). */
  connect(): Promise<void>;
  /** Creates a model to train. */
  createTrainingClient(options: CreateTrainingClientOptions): Promise<TrainingClient>;
  /** Opens a sampler on a path from `saveWeightsForSampler` (or a base model name). */
  createSamplingClient(path: string): Promise<SamplingClient>;
  /** Ends the session and releases what it created. */
  close(): Promise<void>;
}
