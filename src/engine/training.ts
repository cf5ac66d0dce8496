/**
 * The training half of the local engine: weights, accumulated gradients and Adam state of one
 * model, with `forward`, `forwardBackward` and `optimStep` over Tinker datums.
 *
 * @module
 */
import { adamParams } from "../wire/wire.js";
import type { ForwardBackwardOutput, LossFnOutput, OptimStepOutput } from "../wire/results.js";
import type { AdamParams, Datum } from "../wire/wire.js";
import { prepareBatch, sliceBatch } from "./batch.js";
import type { ResolvedModelConfig } from "./config.js";
import type { ResolvedLora } from "./lora.js";
import { LoraState } from "./lora.js";
import { AdamState, type AdamStepReport } from "./optimizer.js";
import { initializeParameters, type ModelTensors } from "./params.js";
import { Rng } from "./prng.js";
import { EngineRuntime, type ComputeOptions } from "./runtime.js";
import type { PackedBatch } from "./transformer.js";

/** Options of {@link TrainingCore}. */
export interface TrainingCoreOptions extends ComputeOptions {
  /**
   * Most positions of one batched pass (at least one full context; default 2048): longer calls
   * run in chunks whose gradients add up, which bounds the activation memory.
   */
  maxChunkRows?: number;
  /** Train rank-r factors of the block projections over frozen base weights (see `lora.ts`) instead of every weight. */
  lora?: ResolvedLora | undefined;
}

/** Most parameters whose gradients the calling thread sums alone after a data-parallel backward pass. */
const LOCAL_REDUCE_PARAMS = 1 << 20;

/** Positions of one batched training pass of `config` for a `maxChunkRows` option (default 2048). */
export function trainingChunkRows(config: ResolvedModelConfig, maxChunkRows = 2048): number {
  return Math.max(maxChunkRows, config.contextLength);
}

/**
 * Weights, gradients and optimizer state of one model, trained data-parallel: each call's
 * sequences are split at sequence boundaries into one slice per thread, each thread runs the
 * forward and backward pass of its slice into its own gradient buffer (slot 0 straight into the
 * accumulated gradients), and the buffers are then added in slot order, so the result is
 * deterministic for a given thread count. With one thread and the TypeScript kernels it computes
 * exactly what the single-threaded engine did.
 * @internal
 */
export class TrainingCore {
  /** Views of the weights. */
  readonly weights: ModelTensors;
  /** Views of the accumulated gradients. */
  readonly grads: ModelTensors;
  /** Adam moments and step count (of the LoRA factors, for a LoRA model). */
  readonly adam: AdamState;
  /** The trained factors and frozen base weights, for a LoRA model; null when every weight is trained. */
  readonly lora: LoraState | null;
  /** Storage and threads. */
  readonly runtime: EngineRuntime;
  private readonly chunkRows: number;

  /** Builds a model with seeded initial weights. */
  constructor(
    readonly config: ResolvedModelConfig,
    seed: number,
    options: TrainingCoreOptions = {},
  ) {
    this.chunkRows = trainingChunkRows(config, options.maxChunkRows);
    this.runtime = new EngineRuntime(config, options, this.chunkRows);
    const views = this.runtime.views;
    this.weights = views.weights;
    this.grads = views.training!.grads;
    const rng = new Rng(seed);
    initializeParameters(this.weights.flat, config, rng);
    if (options.lora) {
      this.lora = new LoraState(config, options.lora, this.weights, rng);
      const n = this.lora.factors.length;
      this.adam = new AdamState(new Float32Array(n), new Float32Array(n));
    } else {
      this.lora = null;
      this.adam = new AdamState(views.training!.adamM, views.training!.adamV);
    }
  }

  /** Computes target logprobs and losses of `datums`; with `backward`, also adds their gradients. */
  run(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig: Readonly<Record<string, number>> | undefined,
    backward: boolean,
  ): ForwardBackwardOutput {
    const { loss, batch, inputs } = prepareBatch(datums, lossFn, lossFnConfig, this.config);
    const slots = this.runtime.views.slots;
    const lossFnOutputs: LossFnOutput[] = [];
    let total = 0;
    for (let first = 0; first < inputs.length;) {
      let end = first + 1;
      while (end < inputs.length && batch.starts[end + 1]! - batch.starts[first]! <= this.chunkRows) end++;
      const chunk = sliceBatch(batch, first, end);
      const slices = splitBatch(chunk, this.runtime.threads);
      this.runtime.run(slices.map((s) => (s.batch ? { kind: "forward", batch: s.batch } : null)));
      slices.forEach((slice, t) => {
        const ws = slots[t]!.workspace!;
        for (let s = slice.first; s < slice.end; s++) {
          const r0 = chunk.starts[s]! - chunk.starts[slice.first]!;
          const r1 = chunk.starts[s + 1]! - chunk.starts[slice.first]!;
          const logprobs = ws.logprobs.subarray(r0, r1);
          const evaluation = loss.evaluate(logprobs, inputs[first + s]!, lossFnConfig);
          total += evaluation.loss;
          ws.gradLogprobs.set(evaluation.gradLogprobs, r0);
          lossFnOutputs.push({ logprobs: Array.from(logprobs) });
        }
      });
      if (backward) this.backward(slices);
      first = end;
    }
    return { lossFnOutputs, metrics: { "loss:sum": total } };
  }

  /** Backward passes of every slice, then the sum of the slots' gradients into slot 0's. */
  private backward(slices: BatchSlice[]): void {
    try {
      this.runtime.run(slices.map((s) => (s.batch ? { kind: "backward", batch: s.batch } : null)));
    } catch (err) {
      this.clearThreadGradients();
      throw err;
    }
    const sources = slices.flatMap((s, t) => (s.batch && t > 0 ? [t] : []));
    if (sources.length === 0) return;
    const P = this.grads.flat.length;
    // A small model's sum takes less time on this thread than waking the others for their share
    // (which, on a busy machine, can wait for a time slice); each element is summed in the same
    // order either way.
    const T = P <= LOCAL_REDUCE_PARAMS ? 1 : this.runtime.threads;
    const range = (t: number): number => Math.round((t * P) / T);
    this.runtime.run(
      Array.from({ length: T }, (_, t) => ({ kind: "reduce", from: range(t), to: range(t + 1), sources })),
    );
  }

  /** Zeroes the gradient buffers of slots 1.. (after a failed backward pass). */
  private clearThreadGradients(): void {
    this.runtime.views.slots.forEach((slot, t) => {
      if (t > 0) slot.grads?.flat.fill(0);
    });
  }

  /**
   * Applies AdamW to the accumulated gradients and zeroes them. A LoRA model steps its factors
   * with their gradients (the chain rule of the weight gradients) and materialises its weights.
   */
  optimStep(adam: AdamParams): OptimStepOutput {
    const params = adamParams(adam);
    let report: AdamStepReport;
    if (this.lora) {
      const { lora } = this;
      try {
        lora.gradientsFrom(this.grads);
        report = this.adam.apply(lora.factors, lora.grads, params);
      } finally {
        lora.grads.fill(0);
        this.grads.flat.fill(0);
      }
      lora.materialize(this.weights);
    } else report = this.adam.apply(this.weights.flat, this.grads.flat, params);
    return {
      metrics: {
        "grad_norm:mean": report.gradNorm,
        "step:max": this.adam.step,
        "learning_rate:mean": params.learningRate,
      },
    };
  }
}

/** Sequences [first, end) of a batch, handed to one thread. */
interface BatchSlice {
  first: number;
  end: number;
  /** Those sequences as a batch of their own; null when they have no rows. */
  batch: PackedBatch | null;
}

/**
 * Splits `batch` at sequence boundaries into `threads` consecutive slices of about equal rows.
 * Slice t starts at the first sequence starting at or after row t·rows/threads, so it exceeds
 * an equal share by less than one sequence.
 */
export function splitBatch(batch: PackedBatch, threads: number): BatchSlice[] {
  const n = batch.starts.length - 1;
  const bounds = [0];
  for (let t = 1; t < threads; t++) {
    let s = bounds[t - 1]!;
    while (s < n && batch.starts[s]! < (t * batch.rows) / threads) s++;
    bounds.push(s);
  }
  bounds.push(n);
  return Array.from({ length: threads }, (_, t) => {
    const first = bounds[t]!;
    const end = bounds[t + 1]!;
    return { first, end, batch: batch.starts[end]! > batch.starts[first]! ? sliceBatch(batch, first, end) : null };
  });
}
