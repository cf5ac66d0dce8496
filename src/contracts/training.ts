/**
 * The interfaces the pipeline sees every training service through: the embedded `local` engine,
 * Tinker-protocol servers and Weaver implement them alike.
 *
 * @module
 */
import type { LossFunctionName } from "./losses.js";
import type { ForwardBackwardOutput, OptimStepOutput, SampleOutput, SamplingParams } from "../wire/results.js";
import type { AdamParams, Datum, ModelInput } from "../wire/wire.js";

export type {
  ForwardBackwardOutput,
  LossFnOutput,
  OptimStepOutput,
  SampledSequence,
  SampleOutput,
  SamplingParams,
} from "../wire/results.js";

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
  /** Rows of the model's token embedding, when known: every token id must be below it. */
  vocabSize?: number;
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
  /**
   * Computes a loss written in TypeScript over the batch's target logprobs and accumulates its
   * gradients, through `forward` and a `cross_entropy` surrogate (see {@link CustomLossFn}).
   * Resolves once the gradient pass is submitted; `loss:sum` of the result is the custom loss.
   */
  forwardBackwardCustom(data: Datum[], lossFn: CustomLossFn): Promise<ApiFuture<ForwardBackwardOutput>>;
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

/** What a {@link CustomLossFn} answers. */
export interface CustomLossResult {
  /** The value of the loss over the whole batch. */
  loss: number;
  /**
   * ∂loss/∂lp_t: one array per datum, in order, as long as that datum's `logprobs` (zeros where
   * a position does not count).
   */
  gradLogprobs: ReadonlyArray<ArrayLike<number>>;
  /** More metrics to report, by `name:reduction` key (e.g. `dpo/accuracy:mean`). */
  metrics?: Record<string, number>;
}

/**
 * A loss over the target logprobs of a whole batch. `logprobs[i][t]` is the model's logprob of
 * `data[i].loss_fn_inputs.target_tokens[t]` at the current weights; `data` is what was passed to
 * `forwardBackwardCustom`, so a loss can read extra inputs its datums carry (a mask,
 * reference logprobs, pair labels…). It may couple datums: a pairwise loss reads datums 2k and
 * 2k+1, a group loss a whole group. It returns the loss and its gradient with respect to every
 * logprob.
 *
 * @example
 * ```ts
 * // DPO over datums [chosen₀, rejected₀, chosen₁, rejected₁, …], each with `weights` marking
 * // the response and `ref_logprobs` from the reference model.
 * const beta = 0.1;
 * const dpo: CustomLossFn = (data, logprobs) => {
 *   const sum = (i: number, key?: string) => {
 *     const w = data[i]!.loss_fn_inputs.weights!.data;
 *     const lp = key ? data[i]!.loss_fn_inputs[key]!.data : logprobs[i]!;
 *     return lp.reduce((s, x, t) => s + w[t]! * x, 0);
 *   };
 *   const grads = logprobs.map((lp) => lp.map(() => 0));
 *   let loss = 0;
 *   for (let k = 0; k < data.length; k += 2) {
 *     const margin = beta * (sum(k) - sum(k, "ref_logprobs") - sum(k + 1) + sum(k + 1, "ref_logprobs"));
 *     loss += Math.log1p(Math.exp(-margin)); // −log σ(margin)
 *     const g = -beta / (1 + Math.exp(margin)); // ∂loss/∂(Σ w·lp) of the chosen answer
 *     data[k]!.loss_fn_inputs.weights!.data.forEach((w, t) => (grads[k]![t] = g * w));
 *     data[k + 1]!.loss_fn_inputs.weights!.data.forEach((w, t) => (grads[k + 1]![t] = -g * w));
 *   }
 *   return { loss, gradLogprobs: grads };
 * };
 * const output = await (await client.forwardBackwardCustom(pairs, dpo)).result();
 * ```
 */
export type CustomLossFn = (
  data: readonly Datum[],
  logprobs: readonly number[][],
) => CustomLossResult | Promise<CustomLossResult>;
