/**
 * The training half of the local engine: weights, accumulated gradients and Adam state of one
 * model, with `forward`, `forwardBackward` and `optimStep` over Tinker datums.
 *
 * @module
 */
import { adamParams } from "../types/wire.js";
import type { AdamParams, Datum } from "../types/wire.js";
import { prepareBatch, sliceBatch } from "./batch.js";
import type { ResolvedModelConfig } from "./config.js";
import { AdamState } from "./optimizer.js";
import { initializeParameters, parameterCount, tensorViews, type ModelTensors } from "./params.js";
import { Rng } from "./prng.js";
import { backwardBatch, forwardBatch } from "./transformer.js";
import { Workspace } from "./workspace.js";

/** The output of one datum in a {@link ForwardBackwardResult}. */
export type LocalLossFnOutput = {
  /** The logprob of each target token under the current weights (the weights before the pass). */
  logprobs: number[];
};

/** Result of `forward` and `forwardBackward`, in the shape of Tinker's `ForwardBackwardOutput`. */
export interface ForwardBackwardResult {
  /** One entry per datum, in order. */
  lossFnOutputs: LocalLossFnOutput[];
  /** Metrics by `name:reduction` key; `loss:sum` is the loss summed over all datums. */
  metrics: Record<string, number>;
}

/** Result of `optimStep`. */
export interface OptimStepResult {
  /**
   * `grad_norm:mean`: global gradient norm before clipping; `step:max`: number of optimizer steps
   * taken so far (this one included); `learning_rate:mean`: the learning rate used.
   */
  metrics: Record<string, number>;
}

/**
 * Weights, gradients and optimizer state of one model.
 * @internal
 */
export class TrainingCore {
  /** Views of the weights. */
  readonly weights: ModelTensors;
  /** Views of the accumulated gradients. */
  readonly grads: ModelTensors;
  /** Adam moments and step count. */
  readonly adam: AdamState;
  private readonly workspace: Workspace;

  /** Builds a model with seeded initial weights. */
  constructor(
    readonly config: ResolvedModelConfig,
    seed: number,
    /**
     * Most positions of one batched pass (at least one full context): longer calls run in
     * chunks whose gradients add up, which bounds the activation memory.
     */
    private readonly maxChunkRows = 2048,
  ) {
    const size = parameterCount(config);
    this.weights = tensorViews(new Float32Array(size), config);
    this.grads = tensorViews(new Float32Array(size), config);
    this.adam = new AdamState(size);
    this.workspace = new Workspace(config);
    initializeParameters(this.weights.flat, config, new Rng(seed));
  }

  /** Computes target logprobs and losses of `datums`; with `backward`, also adds their gradients. */
  run(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig: Readonly<Record<string, number>> | undefined,
    backward: boolean,
  ): ForwardBackwardResult {
    const { loss, batch, inputs } = prepareBatch(datums, lossFn, lossFnConfig, this.config);
    const limit = Math.max(this.maxChunkRows, this.config.contextLength);
    const ws = this.workspace;
    const lossFnOutputs: LocalLossFnOutput[] = [];
    let total = 0;
    for (let first = 0; first < inputs.length;) {
      let end = first + 1;
      while (end < inputs.length && batch.starts[end + 1]! - batch.starts[first]! <= limit) end++;
      const chunk = sliceBatch(batch, first, end);
      ws.ensure(chunk.rows);
      forwardBatch(this.weights, this.config, ws, chunk);
      for (let s = first; s < end; s++) {
        const logprobs = ws.logprobs.subarray(chunk.starts[s - first]!, chunk.starts[s - first + 1]!);
        const evaluation = loss.evaluate(logprobs, inputs[s]!, lossFnConfig);
        total += evaluation.loss;
        ws.gradLogprobs.set(evaluation.gradLogprobs, chunk.starts[s - first]!);
        lossFnOutputs.push({ logprobs: Array.from(logprobs) });
      }
      if (backward) backwardBatch(this.weights, this.grads, this.config, ws, chunk);
      first = end;
    }
    return { lossFnOutputs, metrics: { "loss:sum": total } };
  }

  /** Applies AdamW to the accumulated gradients and zeroes them. */
  optimStep(adam: AdamParams): OptimStepResult {
    const params = adamParams(adam);
    const report = this.adam.apply(this.weights.flat, this.grads.flat, params);
    return {
      metrics: {
        "grad_norm:mean": report.gradNorm,
        "step:max": this.adam.step,
        "learning_rate:mean": params.learning_rate,
      },
    };
  }
}
