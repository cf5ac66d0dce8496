/**
 * Decoding with a key/value cache, several sequences ("lanes") at a time: feeding a token costs
 * one row of every projection plus attention over the cached rows of its lane, instead of a
 * forward pass over the whole prefix. The rows fed in one call go through the projections as one
 * matrix product, so the weights are read once for all of them.
 *
 * Every row is computed by the same operations whatever the other rows of the call (the matrix
 * kernels guarantee it per row), so a sequence gets the same logits whether it is decoded alone,
 * next to others, or its prompt is fed in one call or token by token. The projections use the
 * same kernels as the batched forward pass, so the logits agree with `forward` to float rounding.
 *
 * @module
 * @internal
 */
import type { Arena } from "./arena.js";
import type { ResolvedModelConfig } from "./config.js";
import { addToRows, fillRows } from "./kernels.js";
import { layerNormRow } from "./layers.js";
import type { MatrixKernels } from "./matrix.js";
import type { ModelTensors } from "./params.js";

/** Most rows of one {@link LaneDecoder.feed} call besides the lanes (prompts are fed in pieces of this size). */
export const PREFILL_ROWS = 32;

/** Decodes rows of several lanes against their cached keys and values. */
export class LaneDecoder {
  /** Most rows per call. */
  readonly maxRows: number;
  /** Logits of the rows of the last call that asked for them (row r at r·vocabSize). */
  readonly logits: Float32Array;
  /**
   * Per lane and block, the keys then the values of every cached position, head by head, so that
   * each head's keys (and values) are consecutive rows of dh floats: key of head h at position p
   * at (h·C + p)·dh, its value C·d further.
   */
  private readonly caches: Float32Array[][];
  private readonly x: Float32Array;
  private readonly y: Float32Array;
  private readonly qkv: Float32Array;
  private readonly attnOut: Float32Array;
  private readonly hidden: Float32Array;
  private readonly probs: Float32Array;

  /**
   * @param w the weights (read live: later weight updates are seen).
   * @param lanes number of sequences decoded side by side.
   * @param arena where the caches and buffers live.
   */
  constructor(
    private readonly w: ModelTensors,
    private readonly config: ResolvedModelConfig,
    readonly lanes: number,
    arena: Arena,
  ) {
    const { dModel: d, contextLength: C, vocabSize: V, nLayers } = config;
    const R = Math.max(lanes, PREFILL_ROWS);
    this.maxRows = R;
    this.caches = Array.from({ length: lanes }, () => Array.from({ length: nLayers }, () => arena.f32(C * 2 * d)));
    this.x = arena.f32(R * d);
    this.y = arena.f32(R * d);
    this.qkv = arena.f32(R * 3 * d);
    this.attnOut = arena.f32(R * d);
    this.hidden = arena.f32(R * 4 * d);
    this.logits = arena.f32(R * V);
    this.probs = arena.f32(C);
  }

  /** Copies the cached positions 0..count−1 of lane `fromLane` of `source` into lane `lane`. */
  copyPrefix(source: LaneDecoder, fromLane: number, lane: number, count: number): void {
    const { dModel: d, nHeads, contextLength: C } = this.config;
    const dh = d / nHeads;
    source.caches[fromLane]!.forEach((cache, l) => {
      const target = this.caches[lane]![l]!;
      for (let h = 0; h < 2 * nHeads; h++) {
        const at = h * C * dh;
        target.set(cache.subarray(at, at + count * dh), at);
      }
    });
  }

  /**
   * Feeds `count` rows: row r is token `tokens[r]` at position `positions[r]` of lane
   * `laneOf[r]`. Positions 0..pos−1 of a lane must have been fed before, in earlier calls or at
   * earlier rows of this call (feeding a position again overwrites it; everything after it is
   * forgotten). With `withLogits`, the logits of row r are left at `logits[r·vocabSize..]`.
   */
  feed(
    kernels: MatrixKernels,
    count: number,
    laneOf: Int32Array,
    positions: Int32Array,
    tokens: Int32Array,
    withLogits: boolean,
  ): void {
    const { w, x, y, qkv, attnOut, hidden } = this;
    const { dModel: d, nHeads, vocabSize: V, contextLength: C } = this.config;
    if (count > this.maxRows) throw new Error(`internal: ${count} decoder rows > ${this.maxRows}`);
    const dh = d / nHeads;
    const scale = 1 / Math.sqrt(dh);
    for (let r = 0; r < count; r++) {
      const t = tokens[r]! * d;
      const p = positions[r]! * d;
      for (let j = 0; j < d; j++) x[r * d + j] = w.wte[t + j]! + w.wpe[p + j]!;
    }
    for (let l = 0; l < this.config.nLayers; l++) {
      const b = w.blocks[l]!;
      for (let r = 0; r < count; r++) layerNormRow(y, null, x, r * d, b.ln1Gain, b.ln1Bias, d);
      fillRows(qkv, b.bqkv, count, 3 * d);
      kernels.matmulNN(qkv, y, b.wqkv, count, d, 3 * d, true);
      // Every row's keys and values go into the cache first: a later row may attend to them.
      for (let r = 0; r < count; r++) {
        const cache = this.caches[laneOf[r]!]![l]!;
        const pos = positions[r]!;
        for (let h = 0; h < nHeads; h++) {
          const k = r * 3 * d + d + h * dh;
          cache.set(qkv.subarray(k, k + dh), (h * C + pos) * dh);
          cache.set(qkv.subarray(k + d, k + d + dh), C * d + (h * C + pos) * dh);
        }
      }
      for (let r = 0; r < count; r++) {
        const cache = this.caches[laneOf[r]!]![l]!;
        for (let h = 0; h < nHeads; h++) {
          const keys = h * C * dh;
          kernels.attendRow(
            qkv,
            r * 3 * d + h * dh,
            cache,
            keys,
            cache,
            C * d + keys,
            positions[r]! + 1,
            dh,
            scale,
            this.probs,
            attnOut,
            r * d + h * dh,
          );
        }
      }
      kernels.matmulNN(x, attnOut, b.wo, count, d, d, true);
      addToRows(x, b.bo, count, d);
      for (let r = 0; r < count; r++) layerNormRow(y, null, x, r * d, b.ln2Gain, b.ln2Bias, d);
      fillRows(hidden, b.b1, count, 4 * d);
      kernels.matmulNN(hidden, y, b.w1, count, d, 4 * d, true);
      kernels.geluForward(hidden, hidden, count * 4 * d);
      kernels.matmulNN(x, hidden, b.w2, count, 4 * d, d, true);
      addToRows(x, b.b2, count, d);
    }
    if (!withLogits) return;
    for (let r = 0; r < count; r++) layerNormRow(y, null, x, r * d, w.lnfGain, w.lnfBias, d);
    kernels.matmulNTRows(this.logits, y, w.wte, count, d, V, false);
  }
}
