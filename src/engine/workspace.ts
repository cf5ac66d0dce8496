/**
 * Preallocated activation and gradient buffers of one thread's batched forward/backward pass,
 * sized for a fixed number of rows and carved from the engine's arena, so a training step
 * allocates nothing in its hot loops and other threads can read the numbers (the logprobs) and
 * write the loss gradients.
 *
 * @module
 * @internal
 */
import type { Arena } from "./arena.js";
import { AttentionScratch } from "./attention.js";
import type { ResolvedModelConfig } from "./config.js";

/** Activations of one block kept for the backward pass (rows × width). */
export interface BlockActivations {
  /** Normalised input of the attention sub-block, and its rstd per row. */
  xhat1: Float32Array;
  rstd1: Float32Array;
  /** Layer-norm output fed to the QKV projection. */
  y1: Float32Array;
  /** Query | key | value rows (3d wide). */
  qkv: Float32Array;
  /** Attention output before the output projection. */
  attnOut: Float32Array;
  xhat2: Float32Array;
  rstd2: Float32Array;
  /** Layer-norm output fed to the MLP. */
  y2: Float32Array;
  /** MLP pre-activation (4d wide); its GELU is recomputed in the backward pass. */
  hidden: Float32Array;
}

/** All buffers of one batched pass over at most `rows` token positions. */
export class Workspace {
  /** Residual stream. */
  readonly x: Float32Array;
  readonly blocks: BlockActivations[];
  readonly xhatF: Float32Array;
  readonly rstdF: Float32Array;
  /** Final layer-norm output. */
  readonly yF: Float32Array;
  /** Logits (rows × vocab); turned into dlogits in place by the backward pass. */
  readonly logits: Float32Array;
  /** log Σ exp(logits) per row. */
  readonly lse: Float64Array;
  /** Target logprob per row. */
  readonly logprobs: Float64Array;
  /** dLoss/dlogprob per row. */
  readonly gradLogprobs: Float64Array;
  /** Backward temporaries (`dy` also holds the gradient of the attention output). */
  readonly dx: Float32Array;
  readonly dy: Float32Array;
  /**
   * 4d per row, used in turn by values never alive together: a block's GELU output (forward pass,
   * and recomputed in the backward pass), then the gradient of the MLP's hidden layer, then the
   * gradient of the query | key | value rows (3d per row).
   */
  readonly wide: Float32Array;
  /** Double-precision scratch for reductions (4d wide). */
  readonly acc: Float64Array;
  /** Per-head attention matrices. */
  readonly attention: AttentionScratch;

  /** Carves buffers for `rows` positions from `arena`. */
  constructor(
    config: ResolvedModelConfig,
    /** Row capacity. */
    readonly rows: number,
    arena: Arena,
  ) {
    const R = rows;
    const { dModel: d, vocabSize: V, nLayers } = config;
    const f = (n: number): Float32Array => arena.f32(n);
    this.x = f(R * d);
    this.blocks = [];
    for (let l = 0; l < nLayers; l++) {
      this.blocks.push({
        xhat1: f(R * d),
        rstd1: f(R),
        y1: f(R * d),
        qkv: f(R * 3 * d),
        attnOut: f(R * d),
        xhat2: f(R * d),
        rstd2: f(R),
        y2: f(R * d),
        hidden: f(R * 4 * d),
      });
    }
    this.xhatF = f(R * d);
    this.rstdF = f(R);
    this.yF = f(R * d);
    this.logits = f(R * V);
    this.lse = arena.f64(R);
    this.logprobs = arena.f64(R);
    this.gradLogprobs = arena.f64(R);
    this.dx = f(R * d);
    this.dy = f(R * d);
    this.wide = f(R * 4 * d);
    this.acc = arena.f64(4 * d);
    this.attention = new AttentionScratch(config.contextLength, d / config.nHeads, arena);
  }
}
