/**
 * The matrix products of the engine behind one interface, with two implementations: the
 * WebAssembly SIMD kernels (fast; their operands must live in the engine's WebAssembly memory)
 * and the TypeScript kernels of `kernels.ts` (the fallback, and the reference in tests).
 *
 * Both compute every row of a product by the same operations whatever the other rows, so a
 * sequence decoded alone gets the same bits as when it is decoded in a batch with others. The
 * two implementations differ from each other in rounding: the TypeScript kernels sum in double
 * precision and round once, the WebAssembly kernels round every step in single precision.
 * `matmulNT` (training: the WebAssembly kernels transpose B and run the faster NN product) and
 * `matmulNTRows` (decoding: dot products, no copy of B) differ in rounding from each other too,
 * so a caller keeps to one of them for a given product.
 *
 * @module
 * @internal
 */
import { matmulNN, matmulNT, matmulTN } from "./kernels.js";
import { attendRow, causalSoftmax, causalSoftmaxBackward, geluBackward, geluForward, logSumExp } from "./layers.js";
import { wasmApi, type WasmMemory, type WasmModule } from "./wasm/api.js";
import { KERNELS_WASM_BASE64 } from "./wasm/kernels-wasm.js";

/** Which kernels an engine runs: WebAssembly SIMD or TypeScript. */
export type KernelKind = "wasm" | "js";

/** A product C = op(A)·op(B) of row-major matrices: C[m×n], reduction over k. */
type Product = (
  c: Float32Array,
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
  accumulate: boolean,
) => void;

/**
 * Matrix products over row-major `Float32Array`s (operands read from index 0), decode attention,
 * and the GELU of the MLP (element by element).
 */
export interface MatrixKernels {
  /** Which implementation this is. */
  readonly kind: KernelKind;
  /** C[m×n] = A[m×k]·B[k×n], or C += A·B when `accumulate`. */
  matmulNN: Product;
  /** C[m×n] = A[m×k]·B[n×k]ᵀ, or C += A·Bᵀ when `accumulate`, for batches of many rows. */
  matmulNT: Product;
  /** The same product for a few rows (decoding), as dot products of rows of A and B. */
  matmulNTRows: Product;
  /** C[k×n] += A[m×k]ᵀ·B[m×n]. */
  matmulTN(c: Float32Array, a: Float32Array, b: Float32Array, m: number, k: number, n: number): void;
  /**
   * Causal attention of one query (q[qOff..qOff+dh)) over `count` keys and values stored as
   * consecutive rows of dh floats from keys[kOff] and values[vOff]: softmax(scale·q·Kᵀ)·V into
   * out[outOff..outOff+dh). `probs` is scratch of at least `count` floats.
   */
  attendRow(
    q: Float32Array,
    qOff: number,
    keys: Float32Array,
    kOff: number,
    values: Float32Array,
    vOff: number,
    count: number,
    dh: number,
    scale: number,
    probs: Float32Array,
    out: Float32Array,
    outOff: number,
  ): void;
  /** out[i] = GELU(x[i]) for i < n (tanh approximation); `out` may be `x`. */
  geluForward(out: Float32Array, x: Float32Array, n: number): void;
  /** grad[i] *= GELU′(x[i]) for i < n. */
  geluBackward(grad: Float32Array, x: Float32Array, n: number): void;
  /**
   * Causal softmax of attention scores in place over p[len×len]: row i becomes softmax(scale·p[i,0..i])
   * followed by zeros.
   */
  causalSoftmax(p: Float32Array, len: number, scale: number): void;
  /**
   * Its backward pass in place over dp[len×len], given its output p: row i becomes
   * p∘(dp − Σ p∘dp)·scale on j ≤ i, zeros above.
   */
  causalSoftmaxBackward(dp: Float32Array, p: Float32Array, len: number, scale: number): void;
  /** lse[r] = log Σ_v exp(x[r·n + v]) for r < rows. */
  logSumExpRows(lse: Float64Array, x: Float32Array, rows: number, n: number): void;
  /**
   * x[r·n + v] = −g[r]·exp(x[r·n + v] − lse[r]) in place for r < rows: the gradient of
   * g[r]·log softmax(x_r)[t] with respect to the logits x_r, but for the g[r] the caller adds at t.
   */
  logitsBackward(x: Float32Array, rows: number, n: number, lse: Float64Array, g: Float64Array): void;
}

/** The TypeScript kernels. */
export const JS_KERNELS: MatrixKernels = {
  kind: "js",
  matmulNN,
  matmulNT,
  matmulNTRows: matmulNT,
  matmulTN,
  attendRow: (q, qOff, keys, kOff, values, vOff, count, dh, scale, probs, out, outOff) =>
    attendRow(q, qOff, keys, kOff, values, vOff, dh, count, dh, scale, probs, out, outOff),
  geluForward,
  geluBackward,
  causalSoftmax,
  causalSoftmaxBackward,
  logSumExpRows(lse, x, rows, n) {
    for (let r = 0; r < rows; r++) lse[r] = logSumExp(x, r * n, n);
  },
  logitsBackward(x, rows, n, lse, g) {
    for (let r = 0; r < rows; r++) {
      const gr = g[r]!;
      const o = r * n;
      const l = lse[r]!;
      for (let v = 0; v < n; v++) x[o + v] = -gr * Math.exp(x[o + v]! - l);
    }
  },
};

/** The functions kernels.wat exports (pointers are byte offsets into the memory). */
interface KernelExports {
  gemm_nn(c: number, a: number, b: number, m: number, k: number, n: number, accumulate: number): void;
  gemm_nt(c: number, a: number, b: number, m: number, k: number, n: number, accumulate: number): void;
  gemm_tn(c: number, a: number, b: number, m: number, k: number, n: number): void;
  transpose(dst: number, src: number, rows: number, cols: number): void;
  gelu_forward(out: number, x: number, n: number): void;
  gelu_backward(grad: number, x: number, n: number): void;
  softmax_causal(p: number, len: number, scale: number): void;
  softmax_causal_backward(dp: number, p: number, len: number, scale: number): void;
  softmax_stats(x: number, rows: number, n: number, out: number): void;
  logits_backward(x: number, rows: number, n: number, lse: number, g: number): void;
}

let compiled: WasmModule | null | undefined;

/**
 * The compiled kernels module, or null when this runtime cannot compile it (no WebAssembly SIMD
 * or no shared memory). Compiled once per thread.
 */
export function kernelsModule(): WasmModule | null {
  if (compiled === undefined) {
    try {
      compiled = new wasmApi.Module(Buffer.from(KERNELS_WASM_BASE64, "base64"));
    } catch {
      compiled = null;
    }
  }
  return compiled;
}

/** The WebAssembly kernels over one memory, with `scratch` (inside it) for the transposed operand of `matmulNT`. */
export class WasmKernels implements MatrixKernels {
  readonly kind = "wasm";
  private readonly exports: KernelExports;
  private readonly buffer: ArrayBufferLike;

  /**
   * @param module from {@link kernelsModule}.
   * @param memory the engine's memory; every operand must be a view into it.
   * @param scratch a view into it of at least n·k floats for the largest `matmulNT`.
   */
  constructor(
    module: WasmModule,
    memory: WasmMemory,
    private readonly scratch: Float32Array,
  ) {
    this.exports = new wasmApi.Instance(module, { env: { memory } }).exports as KernelExports;
    this.buffer = memory.buffer;
  }

  readonly matmulNN: Product = (c, a, b, m, k, n, accumulate) => {
    this.exports.gemm_nn(this.ptr(c), this.ptr(a), this.ptr(b), m, k, n, accumulate ? 1 : 0);
  };

  /** Transposes B into scratch, then runs A[m×k]·(Bᵀ)[k×n] as an NN product. */
  readonly matmulNT: Product = (c, a, b, m, k, n, accumulate) => {
    const bt = this.scratchFor(n * k);
    this.exports.transpose(bt, this.ptr(b), n, k);
    this.exports.gemm_nn(this.ptr(c), this.ptr(a), bt, m, k, n, accumulate ? 1 : 0);
  };

  readonly matmulNTRows: Product = (c, a, b, m, k, n, accumulate) => {
    this.exports.gemm_nt(this.ptr(c), this.ptr(a), this.ptr(b), m, k, n, accumulate ? 1 : 0);
  };

  /** Accumulates (Aᵀ)[k×m]·B[m×n], reading A by columns (no transposed copy). */
  matmulTN(c: Float32Array, a: Float32Array, b: Float32Array, m: number, k: number, n: number): void {
    this.exports.gemm_tn(this.ptr(c), this.ptr(a), this.ptr(b), m, k, n);
  }

  /** Scores as a 1×count NT product, the softmax here, then the 1×dh NN product with the values. */
  attendRow(
    q: Float32Array,
    qOff: number,
    keys: Float32Array,
    kOff: number,
    values: Float32Array,
    vOff: number,
    count: number,
    dh: number,
    scale: number,
    probs: Float32Array,
    out: Float32Array,
    outOff: number,
  ): void {
    const p = this.ptr(probs);
    this.exports.gemm_nt(p, this.ptr(q) + 4 * qOff, this.ptr(keys) + 4 * kOff, 1, dh, count, 0);
    let max = -Infinity;
    for (let j = 0; j < count; j++) {
      const s = probs[j]! * scale;
      probs[j] = s;
      if (s > max) max = s;
    }
    let sum = 0;
    for (let j = 0; j < count; j++) {
      const e = Math.exp(probs[j]! - max);
      probs[j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j < count; j++) probs[j] = probs[j]! * inv;
    this.exports.gemm_nn(this.ptr(out) + 4 * outOff, p, this.ptr(values) + 4 * vOff, 1, count, dh, 0);
  }

  geluForward(out: Float32Array, x: Float32Array, n: number): void {
    this.exports.gelu_forward(this.ptr(out), this.ptr(x), n);
  }

  geluBackward(grad: Float32Array, x: Float32Array, n: number): void {
    this.exports.gelu_backward(this.ptr(grad), this.ptr(x), n);
  }

  causalSoftmax(p: Float32Array, len: number, scale: number): void {
    this.exports.softmax_causal(this.ptr(p), len, scale);
  }

  causalSoftmaxBackward(dp: Float32Array, p: Float32Array, len: number, scale: number): void {
    this.exports.softmax_causal_backward(this.ptr(dp), this.ptr(p), len, scale);
  }

  /** The maximum and the sum of exps of each row into scratch, then the logarithm here. */
  logSumExpRows(lse: Float64Array, x: Float32Array, rows: number, n: number): void {
    const stats = this.scratchFor(2 * rows);
    this.exports.softmax_stats(this.ptr(x), rows, n, stats);
    const s = this.scratch;
    for (let r = 0; r < rows; r++) lse[r] = s[2 * r]! + Math.log(s[2 * r + 1]!);
  }

  logitsBackward(x: Float32Array, rows: number, n: number, lse: Float64Array, g: Float64Array): void {
    this.exports.logits_backward(this.ptr(x), rows, n, this.ptr(lse), this.ptr(g));
  }

  /** Byte offset of the scratch, checked to hold `floats`. */
  private scratchFor(floats: number): number {
    if (this.scratch.length < floats) throw new Error(`internal: kernel scratch of ${this.scratch.length} < ${floats}`);
    return this.ptr(this.scratch);
  }

  private ptr(x: Float32Array | Float64Array): number {
    if (x.buffer !== this.buffer)
      throw new Error("internal: a WebAssembly kernel operand is outside the engine memory");
    return x.byteOffset;
  }
}
