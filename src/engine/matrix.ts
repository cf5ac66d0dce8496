/**
 * The matrix products of the engine behind one interface, with two implementations: the
 * WebAssembly SIMD kernels (fast; their operands must live in the engine's WebAssembly memory)
 * and the TypeScript kernels of `kernels.ts` (the fallback, and the reference in tests).
 *
 * Both compute every row of a product by the same operations whatever the other rows, so a
 * sequence decoded alone gets the same bits as when it is decoded in a batch with others. The
 * two implementations differ from each other in rounding: the TypeScript kernels sum in double
 * precision and round once, the WebAssembly kernels round every step in single precision.
 *
 * @module
 * @internal
 */
import { matmulNN, matmulNT, matmulTN } from "./kernels.js";
import { wasmApi, type WasmMemory, type WasmModule } from "./wasm/api.js";
import { KERNELS_WASM_BASE64 } from "./wasm/kernels-wasm.js";

/** Which kernels an engine runs: WebAssembly SIMD or TypeScript. */
export type KernelKind = "wasm" | "js";

/** Matrix products over row-major `Float32Array`s (operands read from index 0). */
export interface MatrixKernels {
  /** Which implementation this is. */
  readonly kind: KernelKind;
  /** C[m×n] = A[m×k]·B[k×n], or C += A·B when `accumulate`. */
  matmulNN(
    c: Float32Array,
    a: Float32Array,
    b: Float32Array,
    m: number,
    k: number,
    n: number,
    accumulate: boolean,
  ): void;
  /** C[m×n] = A[m×k]·B[n×k]ᵀ, or C += A·Bᵀ when `accumulate`. */
  matmulNT(
    c: Float32Array,
    a: Float32Array,
    b: Float32Array,
    m: number,
    k: number,
    n: number,
    accumulate: boolean,
  ): void;
  /** C[k×n] += A[m×k]ᵀ·B[m×n]. */
  matmulTN(c: Float32Array, a: Float32Array, b: Float32Array, m: number, k: number, n: number): void;
}

/** The TypeScript kernels. */
export const JS_KERNELS: MatrixKernels = { kind: "js", matmulNN, matmulNT, matmulTN };

/** The functions kernels.wat exports (pointers are byte offsets into the memory). */
interface KernelExports {
  gemm_nn(c: number, a: number, b: number, m: number, k: number, n: number, accumulate: number): void;
  gemm_nt(c: number, a: number, b: number, m: number, k: number, n: number, accumulate: number): void;
  transpose(dst: number, src: number, rows: number, cols: number): void;
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

/** The WebAssembly kernels over one memory, with `scratch` (inside it) for transposes. */
export class WasmKernels implements MatrixKernels {
  readonly kind = "wasm";
  private readonly exports: KernelExports;
  private readonly buffer: ArrayBufferLike;

  /**
   * @param module from {@link kernelsModule}.
   * @param memory the engine's memory; every operand must be a view into it.
   * @param scratch a view into it of at least m·k floats for the largest `matmulTN`.
   */
  constructor(
    module: WasmModule,
    memory: WasmMemory,
    private readonly scratch: Float32Array,
  ) {
    this.exports = new wasmApi.Instance(module, { env: { memory } }).exports as KernelExports;
    this.buffer = memory.buffer;
  }

  matmulNN(
    c: Float32Array,
    a: Float32Array,
    b: Float32Array,
    m: number,
    k: number,
    n: number,
    accumulate: boolean,
  ): void {
    this.exports.gemm_nn(this.ptr(c), this.ptr(a), this.ptr(b), m, k, n, accumulate ? 1 : 0);
  }

  matmulNT(
    c: Float32Array,
    a: Float32Array,
    b: Float32Array,
    m: number,
    k: number,
    n: number,
    accumulate: boolean,
  ): void {
    this.exports.gemm_nt(this.ptr(c), this.ptr(a), this.ptr(b), m, k, n, accumulate ? 1 : 0);
  }

  /** Transposes A into scratch, then accumulates (Aᵀ)[k×m]·B[m×n]. */
  matmulTN(c: Float32Array, a: Float32Array, b: Float32Array, m: number, k: number, n: number): void {
    if (this.scratch.length < m * k) throw new Error(`internal: kernel scratch of ${this.scratch.length} < ${m * k}`);
    const at = this.ptr(this.scratch);
    this.exports.transpose(at, this.ptr(a), m, k);
    this.exports.gemm_nn(this.ptr(c), at, this.ptr(b), k, m, n, 1);
  }

  private ptr(x: Float32Array): number {
    if (x.buffer !== this.buffer)
      throw new Error("internal: a WebAssembly kernel operand is outside the engine memory");
    return x.byteOffset;
  }
}
