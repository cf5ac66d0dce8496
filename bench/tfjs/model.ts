/**
 * The engine benchmark's reference: the same decoder-only transformer as nexrl's embedded engine,
 * written in TensorFlow.js. Token and learned positional embeddings, pre-LayerNorm blocks with
 * causal multi-head self-attention and a 4×-wide GELU MLP (tanh approximation), a final
 * LayerNorm and an output projection tied to the token embeddings, with GPT-2 initialisation as
 * in src/engine/params.ts. Training is cross-entropy summed over tokens with per-token weights, backward and
 * Adam; sampling re-runs the full forward on the growing sequences for every token (no KV cache).
 */
import type { Optimizer, Tensor, Tf, Variable } from "./tf.js";

export interface ModelShape {
  vocabSize: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  contextLength: number;
}

export interface AdamConfig {
  learningRate: number;
  beta1: number;
  beta2: number;
  eps: number;
}

interface Block {
  ln1Gain: Variable;
  ln1Bias: Variable;
  wQkv: Variable;
  bQkv: Variable;
  wOut: Variable;
  bOut: Variable;
  ln2Gain: Variable;
  ln2Bias: Variable;
  wUp: Variable;
  bUp: Variable;
  wDown: Variable;
  bDown: Variable;
}

const INIT_STD = 0.02;
const LN_EPS = 1e-5;
const GELU_C = Math.sqrt(2 / Math.PI);
const GELU_K = 0.044715;

export class TfjsTransformer {
  private readonly tokenEmbedding: Variable;
  private readonly positionEmbedding: Variable;
  private readonly blocks: Block[] = [];
  private readonly lnfGain: Variable;
  private readonly lnfBias: Variable;
  private readonly params: Variable[] = [];
  private readonly masks = new Map<number, Tensor>();
  private readonly optimizer: Optimizer;

  constructor(
    private readonly tf: Tf,
    private readonly shape: ModelShape,
    adam: AdamConfig,
    seed: number,
  ) {
    const { vocabSize: v, dModel: d, contextLength: ctx } = shape;
    let nextSeed = seed;
    const normal = (dims: number[], std = INIT_STD) => this.param(tf.randomNormal(dims, 0, std, "float32", nextSeed++));
    // Projections that write into the residual stream start smaller, so its variance does not grow with depth.
    const residual = (dims: number[]) => normal(dims, INIT_STD / Math.sqrt(2 * shape.nLayers));
    const zeros = (dims: number[]) => this.param(tf.zeros(dims));
    const ones = (dims: number[]) => this.param(tf.ones(dims));
    this.tokenEmbedding = normal([v, d]);
    this.positionEmbedding = normal([ctx, d]);
    for (let l = 0; l < shape.nLayers; l++) {
      this.blocks.push({
        ln1Gain: ones([d]),
        ln1Bias: zeros([d]),
        wQkv: normal([d, 3 * d]),
        bQkv: zeros([3 * d]),
        wOut: residual([d, d]),
        bOut: zeros([d]),
        ln2Gain: ones([d]),
        ln2Bias: zeros([d]),
        wUp: normal([d, 4 * d]),
        bUp: zeros([4 * d]),
        wDown: residual([4 * d, d]),
        bDown: zeros([d]),
      });
    }
    this.lnfGain = ones([d]);
    this.lnfBias = zeros([d]);
    this.optimizer = tf.train.adam(adam.learningRate, adam.beta1, adam.beta2, adam.eps);
  }

  /**
   * One optimizer step on a batch of `batch` sequences of `seqLen` tokens (row-major ids).
   * @returns the summed weighted cross-entropy before the update.
   */
  trainStep(inputs: Int32Array, targets: Int32Array, weights: Float32Array, batch: number, seqLen: number): number {
    const { tf } = this;
    const ids = tf.tensor2d(inputs, [batch, seqLen], "int32");
    const targetIds = tf.tensor1d(targets, "int32");
    const w = tf.tensor1d(weights, "float32");
    const cost = this.optimizer.minimize(
      () => {
        const logits = this.logits(this.finalNorm(this.hidden(ids, batch, seqLen)));
        const targetLogprobs = tf.sum(
          tf.mul(tf.logSoftmax(logits), tf.cast(tf.oneHot(targetIds, this.shape.vocabSize), "float32")),
          1,
        );
        return tf.neg(tf.sum(tf.mul(targetLogprobs, w)));
      },
      true,
      this.params,
    );
    const loss = cost.dataSync()[0]!;
    for (const t of [cost, ids, targetIds, w]) t.dispose();
    return loss;
  }

  /**
   * Samples up to `maxTokens` tokens at temperature 1 for `numSamples` copies of `prompt`,
   * re-running the full forward every token. A sequence ends at `stopId` (kept, as the engine
   * keeps EOS) and leaves the batch. @returns the number of tokens generated.
   */
  sample(prompt: readonly number[], maxTokens: number, numSamples: number, seed: number, stopId: number): number {
    const { tf } = this;
    if (prompt.length + maxTokens > this.shape.contextLength)
      throw new Error("prompt + maxTokens exceeds the context length");
    const d = this.shape.dModel;
    let active = Array.from({ length: numSamples }, () => [...prompt]);
    let generated = 0;
    for (let step = 0; step < maxTokens && active.length > 0; step++) {
      const rows = active.length;
      const len = prompt.length + step;
      const next = tf.tidy(() => {
        const ids = tf.tensor2d(active.flat(), [rows, len], "int32");
        const h = tf.reshape(this.hidden(ids, rows, len), [rows, len, d]);
        // Only the last position is sampled from: skip the final norm and projection elsewhere.
        const last = tf.reshape(tf.slice(h, [0, len - 1, 0], [rows, 1, d]), [rows, d]);
        return tf.multinomial(this.logits(this.finalNorm(last)), 1, seed + step);
      });
      const tokens = next.dataSync();
      next.dispose();
      active.forEach((s, i) => s.push(tokens[i]!));
      generated += rows;
      active = active.filter((s) => s[s.length - 1] !== stopId);
    }
    return generated;
  }

  dispose(): void {
    for (const t of [...this.params, ...this.masks.values()]) t.dispose();
    this.optimizer.dispose();
  }

  private param(initial: Tensor): Variable {
    const v = this.tf.variable(initial);
    initial.dispose();
    this.params.push(v);
    return v;
  }

  /** Residual stream after the last block, `[batch·seqLen, d]`. */
  private hidden(ids: Tensor, batch: number, seqLen: number): Tensor {
    const { tf } = this;
    const { vocabSize: v, dModel: d } = this.shape;
    // tfjs-wasm has no UnsortedSegmentSum, the gradient of gather: look embeddings up as one-hot × matrix.
    const oneHot = tf.cast(tf.oneHot(tf.reshape(ids, [batch * seqLen]), v), "float32");
    const tokens = tf.reshape(tf.matMul(oneHot, this.tokenEmbedding), [batch, seqLen, d]);
    let x = tf.reshape(tf.add(tokens, tf.slice(this.positionEmbedding, [0, 0], [seqLen, d])), [batch * seqLen, d]);
    for (const block of this.blocks) {
      x = tf.add(x, this.attention(layerNorm(tf, x, block.ln1Gain, block.ln1Bias), block, batch, seqLen));
      const up = tf.add(tf.matMul(layerNorm(tf, x, block.ln2Gain, block.ln2Bias), block.wUp), block.bUp);
      x = tf.add(x, tf.add(tf.matMul(gelu(tf, up), block.wDown), block.bDown));
    }
    return x;
  }

  private finalNorm(x: Tensor): Tensor {
    return layerNorm(this.tf, x, this.lnfGain, this.lnfBias);
  }

  /** Output projection, tied to the token embeddings: `h · wteᵀ`. */
  private logits(h: Tensor): Tensor {
    return this.tf.matMul(h, this.tokenEmbedding, false, true);
  }

  private attention(x: Tensor, block: Block, batch: number, seqLen: number): Tensor {
    const { tf } = this;
    const { dModel: d, nHeads: h } = this.shape;
    const dh = d / h;
    const qkv = tf.add(tf.matMul(x, block.wQkv), block.bQkv);
    // [b·t, 3d] → [b, 3h, t, dh], then q, k, v as [b·h, t, dh] each.
    const heads = tf.transpose(tf.reshape(qkv, [batch, seqLen, 3 * h, dh]), [0, 2, 1, 3]);
    const [q, k, v] = tf.split(heads, 3, 1).map((t) => tf.reshape(t, [batch * h, seqLen, dh])) as [
      Tensor,
      Tensor,
      Tensor,
    ];
    const scores = tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(dh)), this.causalMask(seqLen));
    const context = tf.matMul(tf.softmax(scores), v);
    const merged = tf.reshape(tf.transpose(tf.reshape(context, [batch, h, seqLen, dh]), [0, 2, 1, 3]), [
      batch * seqLen,
      d,
    ]);
    return tf.add(tf.matMul(merged, block.wOut), block.bOut);
  }

  /** `[t, t]`: 0 where a position may attend, a large negative number above the diagonal. */
  private causalMask(seqLen: number): Tensor {
    let mask = this.masks.get(seqLen);
    if (mask === undefined) {
      const values = new Float32Array(seqLen * seqLen);
      for (let i = 0; i < seqLen; i++) values.fill(-1e9, i * seqLen + i + 1, (i + 1) * seqLen);
      // Kept across steps: created inside tidy() or minimize(), it would otherwise be disposed with them.
      mask = this.tf.keep(this.tf.tensor2d(values, [seqLen, seqLen]));
      this.masks.set(seqLen, mask);
    }
    return mask;
  }
}

function layerNorm(tf: Tf, x: Tensor, gain: Tensor, bias: Tensor): Tensor {
  const centered = tf.sub(x, tf.mean(x, -1, true));
  const variance = tf.mean(tf.square(centered), -1, true);
  return tf.add(tf.mul(tf.mul(centered, tf.rsqrt(tf.add(variance, LN_EPS))), gain), bias);
}

/** GELU, tanh approximation (as GPT-2 and the engine): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
function gelu(tf: Tf, x: Tensor): Tensor {
  const inner = tf.mul(tf.add(x, tf.mul(tf.mul(tf.mul(x, x), x), GELU_K)), GELU_C);
  return tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(inner)));
}
