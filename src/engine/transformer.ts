/**
 * Batched forward and backward passes of the transformer over a packed batch: the sequences of a
 * call are stacked into one [rows × d] activation matrix (no padding), so every projection is a
 * single large matrix product; only attention looks at sequence boundaries.
 *
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "./config.js";
import { addColumnSums, addToRows, fillRows } from "./kernels.js";
import { layerNormBackward, layerNormForward } from "./layers.js";
import type { MatrixKernels } from "./matrix.js";
import type { ModelTensors } from "./params.js";
import type { Workspace } from "./workspace.js";

/** Sequences stacked row by row. */
export interface PackedBatch {
  /** Total number of positions. */
  rows: number;
  /** Input token of each row. */
  tokens: Int32Array;
  /** Target token of each row (the token whose logprob is computed there). */
  targets: Int32Array;
  /** Row where each sequence starts, plus `rows` at the end. */
  starts: Int32Array;
}

/**
 * Forward pass: fills the workspace activations, the logits, and `ws.logprobs[r]` =
 * log softmax(logits_r)[target_r] for every row. The workspace must hold `batch.rows` rows.
 */
export function forwardBatch(
  w: ModelTensors,
  config: ResolvedModelConfig,
  ws: Workspace,
  batch: PackedBatch,
  kernels: MatrixKernels,
): void {
  const { dModel: d, nHeads, vocabSize: V } = config;
  const R = batch.rows;
  const dh = d / nHeads;
  const x = ws.x;
  for (let s = 0; s + 1 < batch.starts.length; s++) {
    const start = batch.starts[s]!;
    for (let r = start; r < batch.starts[s + 1]!; r++) {
      const t = batch.tokens[r]! * d;
      const p = (r - start) * d;
      for (let j = 0; j < d; j++) x[r * d + j] = w.wte[t + j]! + w.wpe[p + j]!;
    }
  }
  for (let l = 0; l < config.nLayers; l++) {
    const b = w.blocks[l]!;
    const a = ws.blocks[l]!;
    layerNormForward(a.y1, a.xhat1, a.rstd1, x, b.ln1Gain, b.ln1Bias, R, d);
    fillRows(a.qkv, b.bqkv, R, 3 * d);
    kernels.matmulNN(a.qkv, a.y1, b.wqkv, R, d, 3 * d, true);
    for (let s = 0; s + 1 < batch.starts.length; s++) {
      const start = batch.starts[s]!;
      const len = batch.starts[s + 1]! - start;
      for (let h = 0; h < nHeads; h++) ws.attention.forward(kernels, a.attnOut, a.qkv, start, len, h, dh, d);
    }
    kernels.matmulNN(x, a.attnOut, b.wo, R, d, d, true);
    addToRows(x, b.bo, R, d);
    layerNormForward(a.y2, a.xhat2, a.rstd2, x, b.ln2Gain, b.ln2Bias, R, d);
    fillRows(a.hidden, b.b1, R, 4 * d);
    kernels.matmulNN(a.hidden, a.y2, b.w1, R, d, 4 * d, true);
    kernels.geluForward(ws.wide, a.hidden, R * 4 * d);
    kernels.matmulNN(x, ws.wide, b.w2, R, 4 * d, d, true);
    addToRows(x, b.b2, R, d);
  }
  layerNormForward(ws.yF, ws.xhatF, ws.rstdF, x, w.lnfGain, w.lnfBias, R, d);
  kernels.matmulNT(ws.logits, ws.yF, w.wte, R, d, V, false);
  kernels.logSumExpRows(ws.lse, ws.logits, R, V);
  for (let r = 0; r < R; r++) ws.logprobs[r] = ws.logits[r * V + batch.targets[r]!]! - ws.lse[r]!;
}

/**
 * Backward pass after {@link forwardBatch} on the same batch: given dLoss/dlogprob per row in
 * `ws.gradLogprobs`, adds the parameter gradients into `g`. Overwrites the logits.
 */
export function backwardBatch(
  w: ModelTensors,
  g: ModelTensors,
  config: ResolvedModelConfig,
  ws: Workspace,
  batch: PackedBatch,
  kernels: MatrixKernels,
): void {
  const { dModel: d, nHeads, vocabSize: V } = config;
  const R = batch.rows;
  const dh = d / nHeads;
  // dlogits = dL/dlp · (onehot(target) − softmax), in place over the logits.
  const dLogits = ws.logits;
  kernels.logitsBackward(dLogits, R, V, ws.lse, ws.gradLogprobs);
  for (let r = 0; r < R; r++) {
    const t = r * V + batch.targets[r]!;
    dLogits[t] = dLogits[t]! + ws.gradLogprobs[r]!;
  }
  kernels.matmulTN(g.wte, dLogits, ws.yF, R, V, d);
  kernels.matmulNN(ws.dy, dLogits, w.wte, R, V, d, false);
  const dx = ws.dx;
  layerNormBackward(dx, ws.dy, ws.xhatF, ws.rstdF, w.lnfGain, g.lnfGain, g.lnfBias, R, d, false, ws.acc);
  for (let l = config.nLayers - 1; l >= 0; l--) {
    const b = w.blocks[l]!;
    const gb = g.blocks[l]!;
    const a = ws.blocks[l]!;
    // MLP: x += gelu(ln2(x)·w1 + b1)·w2 + b2; the GELU output is recomputed, then overwritten by its gradient.
    const dHidden = ws.wide;
    addColumnSums(gb.b2, dx, R, d, ws.acc);
    kernels.geluForward(dHidden, a.hidden, R * 4 * d);
    kernels.matmulTN(gb.w2, dHidden, dx, R, 4 * d, d);
    kernels.matmulNT(dHidden, dx, b.w2, R, d, 4 * d, false);
    kernels.geluBackward(dHidden, a.hidden, R * 4 * d);
    addColumnSums(gb.b1, dHidden, R, 4 * d, ws.acc);
    kernels.matmulTN(gb.w1, a.y2, dHidden, R, d, 4 * d);
    kernels.matmulNT(ws.dy, dHidden, b.w1, R, 4 * d, d, false);
    layerNormBackward(dx, ws.dy, a.xhat2, a.rstd2, b.ln2Gain, gb.ln2Gain, gb.ln2Bias, R, d, true, ws.acc);
    // Attention: x += attn(ln1(x)·wqkv + bqkv)·wo + bo; dy holds the gradient of attn(…) until
    // the attention backward pass has read it.
    const dAttn = ws.dy;
    const dqkv = ws.wide;
    addColumnSums(gb.bo, dx, R, d, ws.acc);
    kernels.matmulTN(gb.wo, a.attnOut, dx, R, d, d);
    kernels.matmulNT(dAttn, dx, b.wo, R, d, d, false);
    for (let s = 0; s + 1 < batch.starts.length; s++) {
      const start = batch.starts[s]!;
      const len = batch.starts[s + 1]! - start;
      for (let h = 0; h < nHeads; h++) ws.attention.backward(kernels, dqkv, dAttn, a.qkv, start, len, h, dh, d);
    }
    addColumnSums(gb.bqkv, dqkv, R, 3 * d, ws.acc);
    kernels.matmulTN(gb.wqkv, a.y1, dqkv, R, d, 3 * d);
    kernels.matmulNT(ws.dy, dqkv, b.wqkv, R, 3 * d, d, false);
    layerNormBackward(dx, ws.dy, a.xhat1, a.rstd1, b.ln1Gain, gb.ln1Gain, gb.ln1Bias, R, d, true, ws.acc);
  }
  for (let s = 0; s + 1 < batch.starts.length; s++) {
    const start = batch.starts[s]!;
    for (let r = start; r < batch.starts[s + 1]!; r++) {
      const t = batch.tokens[r]! * d;
      const p = (r - start) * d;
      for (let j = 0; j < d; j++) {
        const v = dx[r * d + j]!;
        g.wte[t + j] = g.wte[t + j]! + v;
        g.wpe[p + j] = g.wpe[p + j]! + v;
      }
    }
  }
}
