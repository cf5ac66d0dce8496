/**
 * Single-token decoding with a key/value cache: feeding the token at position `pos` costs one
 * row of every projection plus attention over the `pos + 1` cached rows, instead of a forward
 * pass over the whole prefix. Its projections use the row kernels of the batched products (same
 * summation order), so its logits agree with `forward` to float rounding.
 *
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "./config.js";
import { rowTimesMatrix, rowTimesMatrixT } from "./kernels.js";
import { attendRow, geluForward, layerNormRow } from "./layers.js";
import type { ModelTensors } from "./params.js";

/** Decodes one position at a time against cached keys and values. */
export class KvDecoder {
  /** Logits of the last position fed. */
  readonly logits: Float32Array;
  /** Per block, the query | key | value row of every cached position (contextLength × 3d). */
  private readonly cache: Float32Array[];
  private readonly x: Float32Array;
  private readonly y: Float32Array;
  private readonly attnOut: Float32Array;
  private readonly hidden: Float32Array;
  private readonly probs: Float32Array;

  /** Builds a decoder for the weights `w` (read live: later weight updates are seen). */
  constructor(
    private readonly w: ModelTensors,
    private readonly config: ResolvedModelConfig,
  ) {
    const { dModel: d, contextLength: C, vocabSize: V, nLayers } = config;
    this.cache = Array.from({ length: nLayers }, () => new Float32Array(C * 3 * d));
    this.x = new Float32Array(d);
    this.y = new Float32Array(d);
    this.attnOut = new Float32Array(d);
    this.hidden = new Float32Array(4 * d);
    this.probs = new Float32Array(C);
    this.logits = new Float32Array(V);
  }

  /**
   * Feeds `token` at position `pos` (0 ≤ pos < contextLength); positions 0..pos−1 must have been
   * fed before (feeding `pos` again overwrites it and everything after it is forgotten). Returns
   * the logits for the next token.
   */
  step(token: number, pos: number): Float32Array {
    const { w, x, y, attnOut, hidden } = this;
    const { dModel: d, nHeads, vocabSize: V } = this.config;
    const dh = d / nHeads;
    const scale = 1 / Math.sqrt(dh);
    for (let j = 0; j < d; j++) x[j] = w.wte[token * d + j]! + w.wpe[pos * d + j]!;
    for (let l = 0; l < this.config.nLayers; l++) {
      const b = w.blocks[l]!;
      const cache = this.cache[l]!;
      const row = pos * 3 * d;
      layerNormRow(y, null, x, 0, b.ln1Gain, b.ln1Bias, d);
      cache.set(b.bqkv, row);
      rowTimesMatrix(cache, row, y, 0, b.wqkv, d, 3 * d);
      for (let h = 0; h < nHeads; h++) {
        attendRow(cache, row + h * dh, cache, d + h * dh, 3 * d, pos + 1, dh, d, scale, this.probs, attnOut, h * dh);
      }
      rowTimesMatrix(x, 0, attnOut, 0, b.wo, d, d);
      for (let j = 0; j < d; j++) x[j] = x[j]! + b.bo[j]!;
      layerNormRow(y, null, x, 0, b.ln2Gain, b.ln2Bias, d);
      hidden.set(b.b1);
      rowTimesMatrix(hidden, 0, y, 0, b.w1, d, 4 * d);
      geluForward(hidden, hidden, 4 * d);
      rowTimesMatrix(x, 0, hidden, 0, b.w2, 4 * d, d);
      for (let j = 0; j < d; j++) x[j] = x[j]! + b.b2[j]!;
    }
    layerNormRow(y, null, x, 0, w.lnfGain, w.lnfBias, d);
    rowTimesMatrixT(this.logits, 0, y, 0, w.wte, d, V, false);
    return this.logits;
  }
}
