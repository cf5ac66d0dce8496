/**
 * Preallocated activation and gradient buffers of the batched forward/backward pass. They are
 * sized for the largest batch seen so far and reused across calls, so a training step allocates
 * nothing in its hot loops.
 *
 * @module
 * @internal
 */
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
  /** MLP pre-activation and GELU output (4d wide). */
  hidden: Float32Array;
  hiddenAct: Float32Array;
}

/** All buffers of one batched pass over `rows` token positions. */
export class Workspace {
  /** Row capacity. */
  rows = 0;
  /** Residual stream. */
  x: Float32Array = new Float32Array(0);
  blocks: BlockActivations[] = [];
  xhatF: Float32Array = new Float32Array(0);
  rstdF: Float32Array = new Float32Array(0);
  /** Final layer-norm output. */
  yF: Float32Array = new Float32Array(0);
  /** Logits (rows × vocab); turned into dlogits in place by the backward pass. */
  logits: Float32Array = new Float32Array(0);
  /** log Σ exp(logits) per row. */
  lse: Float64Array = new Float64Array(0);
  /** Target logprob per row. */
  logprobs: Float64Array = new Float64Array(0);
  /** dLoss/dlogprob per row. */
  gradLogprobs: Float64Array = new Float64Array(0);
  /** Backward temporaries. */
  dx: Float32Array = new Float32Array(0);
  dy: Float32Array = new Float32Array(0);
  dAttn: Float32Array = new Float32Array(0);
  dqkv: Float32Array = new Float32Array(0);
  dHidden: Float32Array = new Float32Array(0);
  /** Double-precision scratch for reductions (4d wide). */
  readonly acc: Float64Array;
  /** Per-head attention matrices. */
  readonly attention: AttentionScratch;

  constructor(private readonly config: ResolvedModelConfig) {
    this.acc = new Float64Array(4 * config.dModel);
    this.attention = new AttentionScratch(config.contextLength, config.dModel / config.nHeads);
  }

  /** Grows the buffers to hold `rows` positions. */
  ensure(rows: number): void {
    if (rows <= this.rows) return;
    const R = rows;
    const { dModel: d, vocabSize: V, nLayers } = this.config;
    const f = (n: number): Float32Array => new Float32Array(n);
    this.rows = R;
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
        hiddenAct: f(R * 4 * d),
      });
    }
    this.xhatF = f(R * d);
    this.rstdF = f(R);
    this.yF = f(R * d);
    this.logits = f(R * V);
    this.lse = new Float64Array(R);
    this.logprobs = new Float64Array(R);
    this.gradLogprobs = new Float64Array(R);
    this.dx = f(R * d);
    this.dy = f(R * d);
    this.dAttn = f(R * d);
    this.dqkv = f(R * 3 * d);
    this.dHidden = f(R * 4 * d);
  }
}
