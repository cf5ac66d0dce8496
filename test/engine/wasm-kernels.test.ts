/**
 * The WebAssembly SIMD kernels against the TypeScript kernels (the reference) on odd shapes that
 * reach every tile and remainder path, their row independence (what batched decoding relies
 * on), and the committed module against its source.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { assembleKernels, GENERATED, renderModule } from "../../scripts/build-wasm.js";
import { Arena } from "../../src/engine/arena.js";
import { matmulNN, matmulNT, matmulTN, transpose } from "../../src/engine/kernels.js";
import { attendRow, causalSoftmax, causalSoftmaxBackward, geluBackward, geluForward } from "../../src/engine/layers.js";
import { JS_KERNELS, kernelsModule, WasmKernels } from "../../src/engine/matrix.js";
import { Rng } from "../../src/engine/prng.js";
import { wasmApi } from "../../src/engine/wasm/api.js";

const memory = new wasmApi.Memory({ initial: 64, maximum: 64, shared: true });
const arena = new Arena(memory.buffer);
const kernels = new WasmKernels(kernelsModule()!, memory, arena.f32(64 * 1024));
const rng = new Rng(3);

/** A view into the kernels' memory holding normal random numbers (reused between tests). */
let top = arena.size;
function wasmRandom(n: number): Float32Array {
  const a = new Float32Array(memory.buffer, top, n);
  top += Math.ceil((n * 4) / 64) * 64;
  for (let i = 0; i < n; i++) a[i] = rng.normal();
  return a;
}

function expectClose(actual: Float32Array, expected: Float32Array, scale: number): void {
  let worst = 0;
  expected.forEach((e, i) => (worst = Math.max(worst, Math.abs(actual[i]! - e))));
  // Single-precision rounding at each of k steps against a double-precision sum.
  expect(worst).toBeLessThan(1e-5 * scale);
}

// Rows and columns around the 4×8 and 2×4 tiles, the 64-row blocks, and k below and around 4.
const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [1, 3, 9],
  [2, 4, 4],
  [3, 5, 7],
  [4, 8, 8],
  [5, 13, 12],
  [7, 9, 5],
  [9, 2, 17],
  [16, 12, 33],
  [67, 19, 71],
  [130, 64, 11],
];

describe("WebAssembly kernels against the TypeScript kernels", () => {
  it("assemble from kernels.wat to the committed bytes", async () => {
    expect(readFileSync(GENERATED, "utf8")).toBe(renderModule(await assembleKernels()));
  });

  it.each(SHAPES)("matmulNN %i×%i×%i, assigning and accumulating", (m, k, n) => {
    top = arena.size;
    const [a, b, c0] = [wasmRandom(m * k), wasmRandom(k * n), wasmRandom(m * n)];
    for (const accumulate of [false, true]) {
      const ref = c0.slice();
      matmulNN(ref, a.slice(), b.slice(), m, k, n, accumulate);
      const c = wasmRandom(m * n);
      c.set(c0);
      kernels.matmulNN(c, a, b, m, k, n, accumulate);
      expectClose(c, ref, Math.sqrt(k) + 1);
    }
  });

  it.each(SHAPES)("matmulNT and matmulNTRows %i×%i×%i, assigning and accumulating", (m, k, n) => {
    top = arena.size;
    const [a, b, c0] = [wasmRandom(m * k), wasmRandom(n * k), wasmRandom(m * n)];
    for (const accumulate of [false, true]) {
      const ref = c0.slice();
      matmulNT(ref, a.slice(), b.slice(), m, k, n, accumulate);
      for (const product of [kernels.matmulNT, kernels.matmulNTRows]) {
        const c = wasmRandom(m * n);
        c.set(c0);
        product(c, a, b, m, k, n, accumulate);
        expectClose(c, ref, Math.sqrt(k) + 1);
      }
    }
  });

  it.each([1, 3, 4, 7, 64, 1029])("GELU forward and backward of %i elements", (n) => {
    top = arena.size;
    // Within ±5, where the approximation of tanh is not clamped: there the TypeScript kernel's
    // double-precision 1 − t² keeps a remainder of the clamp that float32 rounds to 0.
    const x = wasmRandom(n);
    x.forEach((v, i) => (x[i] = Math.max(-5, Math.min(5, v * 1.5))));
    const grad = wasmRandom(n);
    const ref = new Float32Array(n);
    geluForward(ref, x.slice(), n);
    const out = wasmRandom(n);
    kernels.geluForward(out, x, n);
    expectClose(out, ref, 5);
    const refGrad = grad.slice();
    geluBackward(refGrad, x.slice(), n);
    kernels.geluBackward(grad, x, n);
    expectClose(grad, refGrad, 1);
    // In place, as the decoder calls it, and far out.
    kernels.geluForward(x, x, n);
    expect(x).toEqual(out);
    x[0] = 40;
    kernels.geluForward(x, x, 1);
    expect(x[0]).toBeCloseTo(40, 4);
  });

  it.each([1, 5, 37])("decode attention over %i cached positions", (count) => {
    top = arena.size;
    const dh = 12;
    const [q, keys, values, probs] = [
      wasmRandom(3 * dh),
      wasmRandom(count * dh + 5),
      wasmRandom(count * dh + 2),
      wasmRandom(count),
    ];
    const ref = new Float32Array(dh + 3);
    attendRow(q.slice(), dh, keys.slice(), 5, values.slice(), 2, dh, count, dh, 0.3, new Float32Array(count), ref, 3);
    const out = wasmRandom(dh + 3);
    kernels.attendRow(q, dh, keys, 5, values, 2, count, dh, 0.3, probs, out, 3);
    expectClose(out.subarray(3), ref.subarray(3), 1);
  });

  it.each(SHAPES)("matmulTN %i×%i×%i accumulates Aᵀ·B", (m, k, n) => {
    top = arena.size;
    const [a, b, c0] = [wasmRandom(m * k), wasmRandom(m * n), wasmRandom(k * n)];
    const ref = c0.slice();
    matmulTN(ref, a.slice(), b.slice(), m, k, n);
    const c = wasmRandom(k * n);
    c.set(c0);
    kernels.matmulTN(c, a, b, m, k, n);
    expectClose(c, ref, Math.sqrt(m) + 1);
    // Reading A by columns sums in the order of the NN product over a transposed copy of A.
    const at = wasmRandom(k * m);
    transpose(at, a, m, k);
    const viaNN = wasmRandom(k * n);
    viaNN.set(c0);
    kernels.matmulNN(viaNN, at, b, k, m, n, true);
    expect(c).toEqual(viaNN);
  });

  it.each([1, 3, 4, 5, 8, 13, 64])("causal softmax and its backward pass over %i×%i scores", (len) => {
    top = arena.size;
    const scale = 1 / Math.sqrt(12);
    const [scores, grad] = [wasmRandom(len * len), wasmRandom(len * len)];
    // A wide range of scores: the float32 exp must stay accurate far below the row's maximum.
    scores.forEach((v, i) => (scores[i] = v * 30));
    const ref = scores.slice();
    causalSoftmax(ref, len, scale);
    const p = wasmRandom(len * len);
    p.set(scores);
    kernels.causalSoftmax(p, len, scale);
    expectClose(p, ref, 1);
    for (let i = 0; i < len; i++) {
      const row = p.subarray(i * len, (i + 1) * len);
      expect(row.subarray(i + 1).every((v) => v === 0)).toBe(true);
      expect(Math.abs(row.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
    }
    const refGrad = grad.slice();
    causalSoftmaxBackward(refGrad, ref, len, scale);
    kernels.causalSoftmaxBackward(grad, p, len, scale);
    expectClose(grad, refGrad, 1);
  });

  it.each([1, 3, 4, 259])("log-sum-exp of logit rows of %i and its backward pass", (n) => {
    top = arena.size;
    const rows = 5;
    const x = wasmRandom(rows * n);
    x.forEach((v, i) => (x[i] = v * 20));
    const f64 = (count: number): Float64Array => {
      const a = new Float64Array(memory.buffer, top, count);
      top += Math.ceil((count * 8) / 64) * 64;
      return a;
    };
    const [lse, refLse, g] = [f64(rows), f64(rows), f64(rows)];
    g.set([0.5, -1, 2, 0, 1e-3]);
    JS_KERNELS.logSumExpRows(refLse, x.slice(), rows, n);
    kernels.logSumExpRows(lse, x, rows, n);
    lse.forEach((l, r) => expect(Math.abs(l - refLse[r]!)).toBeLessThan(1e-5 * (1 + Math.abs(l))));
    const ref = x.slice();
    JS_KERNELS.logitsBackward(ref, rows, n, refLse, g);
    kernels.logitsBackward(x, rows, n, lse, g);
    expectClose(x, ref, 2);
  });

  it("compute each row of NN, NT and NTRows by the same operations whatever the other rows", () => {
    for (const [m, k, n] of [
      [9, 11, 21],
      [6, 128, 259],
      [13, 4, 3],
    ] as const) {
      top = arena.size;
      const [a, b, bt] = [wasmRandom(m * k), wasmRandom(k * n), wasmRandom(n * k)];
      const full = wasmRandom(m * n);
      const fullT = wasmRandom(m * n);
      const fullRows = wasmRandom(m * n);
      kernels.matmulNN(full, a, b, m, k, n, false);
      kernels.matmulNT(fullT, a, bt, m, k, n, false);
      kernels.matmulNTRows(fullRows, a, bt, m, k, n, false);
      const row = wasmRandom(n);
      for (let i = 0; i < m; i++) {
        // The row alone, and as the last row of a pair starting one row earlier.
        const alone = a.subarray(i * k, (i + 1) * k);
        kernels.matmulNN(row, alone, b, 1, k, n, false);
        expect(row).toEqual(full.subarray(i * n, (i + 1) * n));
        kernels.matmulNT(row, alone, bt, 1, k, n, false);
        expect(row).toEqual(fullT.subarray(i * n, (i + 1) * n));
        kernels.matmulNTRows(row, alone, bt, 1, k, n, false);
        expect(row).toEqual(fullRows.subarray(i * n, (i + 1) * n));
      }
      const pair = wasmRandom(2 * n);
      kernels.matmulNN(pair, a.subarray(k, 3 * k), b, 2, k, n, false);
      expect(pair).toEqual(full.subarray(n, 3 * n));
    }
  });

  it("refuse operands outside their memory", () => {
    const outside = new Float32Array(4);
    expect(() => kernels.matmulNN(outside, outside, outside, 2, 2, 2, false)).toThrow(/outside the engine memory/);
  });
});
