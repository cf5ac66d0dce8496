/**
 * Causal multi-head attention over a packed batch, forward and backward. Each (sequence, head)
 * pair is gathered into contiguous [len × dh] matrices so that the score and value products run
 * on the matrix kernels; the masked upper triangle is computed and zeroed, which costs less than
 * short scalar loops would. The backward pass recomputes the attention weights instead of
 * storing them, so memory stays linear in the sequence length.
 *
 * @module
 * @internal
 */
import type { Arena } from "./arena.js";
import type { MatrixKernels } from "./matrix.js";

/** Per-head scratch matrices, sized for the context length. */
export class AttentionScratch {
  private readonly q: Float32Array;
  private readonly k: Float32Array;
  private readonly v: Float32Array;
  private readonly o: Float32Array;
  private readonly dq: Float32Array;
  private readonly dk: Float32Array;
  private readonly dv: Float32Array;
  private readonly p: Float32Array;
  private readonly dp: Float32Array;

  /** @param contextLength longest sequence; @param headDim width of one head; @param arena where the matrices live. */
  constructor(contextLength: number, headDim: number, arena: Arena) {
    const m = (n: number): Float32Array => arena.f32(n);
    const rows = contextLength * headDim;
    [this.q, this.k, this.v, this.o, this.dq, this.dk, this.dv] = [
      m(rows),
      m(rows),
      m(rows),
      m(rows),
      m(rows),
      m(rows),
      m(rows),
    ];
    this.p = m(contextLength * contextLength);
    this.dp = m(contextLength * contextLength);
  }

  /**
   * out[start..start+len) (rows d wide, this head's columns) = softmax(scale·QKᵀ + causal mask)·V
   * for one sequence and head; qkv rows are [query | key | value], 3d wide.
   */
  forward(
    kernels: MatrixKernels,
    out: Float32Array,
    qkv: Float32Array,
    start: number,
    len: number,
    head: number,
    dh: number,
    d: number,
  ): void {
    const { v, o, p } = this;
    this.weights(kernels, qkv, start, len, head, dh, d);
    gather(v, qkv, start, len, 3 * d, 2 * d + head * dh, dh);
    kernels.matmulNN(o, p, v, len, len, dh, false);
    scatter(out, o, start, len, d, head * dh, dh);
  }

  /**
   * Writes the gradients of this sequence's and head's query, key and value columns of `dqkv`
   * from the gradient of the attention output `dOut` (rows d wide).
   */
  backward(
    kernels: MatrixKernels,
    dqkv: Float32Array,
    dOut: Float32Array,
    qkv: Float32Array,
    start: number,
    len: number,
    head: number,
    dh: number,
    d: number,
  ): void {
    const { q, k, v, o: dO, dq, dk, dv, p, dp } = this;
    const scale = 1 / Math.sqrt(dh);
    this.weights(kernels, qkv, start, len, head, dh, d);
    gather(v, qkv, start, len, 3 * d, 2 * d + head * dh, dh);
    gather(dO, dOut, start, len, d, head * dh, dh);
    kernels.matmulNT(dp, dO, v, len, dh, len, false);
    kernels.causalSoftmaxBackward(dp, p, len, scale);
    kernels.matmulNN(dq, dp, k, len, len, dh, false);
    dk.fill(0, 0, len * dh);
    kernels.matmulTN(dk, dp, q, len, len, dh);
    dv.fill(0, 0, len * dh);
    kernels.matmulTN(dv, p, dO, len, len, dh);
    const w = 3 * d;
    scatter(dqkv, dq, start, len, w, head * dh, dh);
    scatter(dqkv, dk, start, len, w, d + head * dh, dh);
    scatter(dqkv, dv, start, len, w, 2 * d + head * dh, dh);
  }

  /** Gathers Q and K of the head and leaves the causal softmax weights in `p` [len × len]. */
  private weights(
    kernels: MatrixKernels,
    qkv: Float32Array,
    start: number,
    len: number,
    head: number,
    dh: number,
    d: number,
  ): void {
    const { q, k, p } = this;
    const scale = 1 / Math.sqrt(dh);
    gather(q, qkv, start, len, 3 * d, head * dh, dh);
    gather(k, qkv, start, len, 3 * d, d + head * dh, dh);
    kernels.matmulNT(p, q, k, len, dh, len, false);
    kernels.causalSoftmax(p, len, scale);
  }
}

/** dst[len × dh] = columns [col, col+dh) of rows start.. of src (rows `stride` wide). */
function gather(
  dst: Float32Array,
  src: Float32Array,
  start: number,
  len: number,
  stride: number,
  col: number,
  dh: number,
): void {
  for (let i = 0; i < len; i++) {
    const s = (start + i) * stride + col;
    const t = i * dh;
    for (let c = 0; c < dh; c++) dst[t + c] = src[s + c]!;
  }
}

/** Columns [col, col+dh) of rows start.. of dst (rows `stride` wide) = src[len × dh]. */
function scatter(
  dst: Float32Array,
  src: Float32Array,
  start: number,
  len: number,
  stride: number,
  col: number,
  dh: number,
): void {
  for (let i = 0; i < len; i++) {
    const s = i * dh;
    const t = (start + i) * stride + col;
    for (let c = 0; c < dh; c++) dst[t + c] = src[s + c]!;
  }
}
