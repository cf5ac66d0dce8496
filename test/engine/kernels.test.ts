import { describe, expect, it } from "vitest";
import { matmulNN, matmulNT, matmulTN, rowTimesMatrix, rowTimesMatrixT, transpose } from "../../src/engine/kernels.js";
import { causalSoftmax, causalSoftmaxBackward } from "../../src/engine/layers.js";
import { Rng } from "../../src/engine/prng.js";

const rng = new Rng(7);
const random = (n: number): Float32Array => Float32Array.from({ length: n }, () => rng.normal());

/** Reference C[m×n] = Σ_p A(i,p)·B(p,j) with accessors, in double precision. */
function reference(
  m: number,
  k: number,
  n: number,
  a: (i: number, p: number) => number,
  b: (p: number, j: number) => number,
): Float64Array {
  const c = new Float64Array(m * n);
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) for (let p = 0; p < k; p++) c[i * n + j]! += a(i, p) * b(p, j);
  return c;
}

function expectClose(actual: Float32Array, expected: Float64Array): void {
  let worst = 0;
  expected.forEach((e, i) => (worst = Math.max(worst, Math.abs(actual[i]! - e) / (1 + Math.abs(e)))));
  expect(worst).toBeLessThan(1e-5);
}

// Odd sizes exercise every remainder loop (rows, reduction steps and columns).
const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [2, 4, 4],
  [3, 5, 7],
  [7, 9, 5],
  [16, 12, 33],
  [5, 1, 6],
];

describe("matrix kernels against a double-precision reference", () => {
  it.each(SHAPES)("matmulNN %i×%i×%i, assigning and accumulating", (m, k, n) => {
    const a = random(m * k);
    const b = random(k * n);
    const c0 = random(m * n);
    const ref = reference(
      m,
      k,
      n,
      (i, p) => a[i * k + p]!,
      (p, j) => b[p * n + j]!,
    );
    const c = c0.slice();
    matmulNN(c, a, b, m, k, n, false);
    expectClose(c, ref);
    const acc = c0.slice();
    matmulNN(acc, a, b, m, k, n, true);
    expectClose(
      acc,
      ref.map((v, i) => v + c0[i]!),
    );
  });

  it.each(SHAPES)("matmulNT %i×%i×%i, assigning and accumulating", (m, k, n) => {
    const a = random(m * k);
    const b = random(n * k);
    const c0 = random(m * n);
    const ref = reference(
      m,
      k,
      n,
      (i, p) => a[i * k + p]!,
      (p, j) => b[j * k + p]!,
    );
    const c = c0.slice();
    matmulNT(c, a, b, m, k, n, false);
    expectClose(c, ref);
    const acc = c0.slice();
    matmulNT(acc, a, b, m, k, n, true);
    expectClose(
      acc,
      ref.map((v, i) => v + c0[i]!),
    );
  });

  it.each(SHAPES)("matmulTN %i×%i×%i accumulates Aᵀ·B", (m, k, n) => {
    const a = random(m * k);
    const b = random(m * n);
    const c0 = random(k * n);
    const ref = reference(
      k,
      m,
      n,
      (i, p) => a[p * k + i]!,
      (p, j) => b[p * n + j]!,
    );
    const c = c0.slice();
    matmulTN(c, a, b, m, k, n);
    expectClose(
      c,
      ref.map((v, i) => v + c0[i]!),
    );
  });

  it("row kernels reproduce one row of the batched products bit for bit", () => {
    const [m, k, n] = [5, 11, 9];
    const a = random(m * k);
    const b = random(k * n);
    const bt = random(n * k);
    const full = new Float32Array(m * n);
    matmulNN(full, a, b, m, k, n, false);
    const fullT = new Float32Array(m * n);
    matmulNT(fullT, a, bt, m, k, n, false);
    for (let i = 0; i < m; i++) {
      const row = new Float32Array(n);
      rowTimesMatrix(row, 0, a, i * k, b, k, n);
      expect(row).toEqual(full.subarray(i * n, (i + 1) * n));
      const rowT = new Float32Array(n);
      rowTimesMatrixT(rowT, 0, a, i * k, bt, k, n, false);
      expect(rowT).toEqual(fullT.subarray(i * n, (i + 1) * n));
    }
  });

  it("transpose tiles cover every element", () => {
    const [r, c] = [19, 37];
    const src = random(r * c);
    const dst = new Float32Array(r * c);
    transpose(dst, src, r, c);
    for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) expect(dst[j * r + i]).toBe(src[i * c + j]);
  });

  it("causal softmax: zeros above the diagonal, rows summing to 1, and its backward pass against finite differences", () => {
    const len = 6;
    const scale = 0.7;
    const scores = random(len * len);
    const weights = random(len * len);
    const p = scores.slice();
    causalSoftmax(p, len, scale);
    for (let i = 0; i < len; i++) {
      const row = p.subarray(i * len, (i + 1) * len);
      expect(row.subarray(i + 1).every((v) => v === 0)).toBe(true);
      expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
    }
    // L = Σ weights∘softmax(scores): its gradient by the backward pass and by central differences.
    const grad = weights.slice();
    causalSoftmaxBackward(grad, p, len, scale);
    const loss = (s: Float32Array): number => {
      const q = s.slice();
      causalSoftmax(q, len, scale);
      return q.reduce((sum, v, i) => sum + v * weights[i]!, 0);
    };
    const h = 1e-2;
    for (let i = 0; i < len; i++) {
      for (let j = 0; j < len; j++) {
        const plus = scores.slice();
        const minus = scores.slice();
        plus[i * len + j]! += h;
        minus[i * len + j]! -= h;
        expect(grad[i * len + j]).toBeCloseTo((loss(plus) - loss(minus)) / (2 * h), 4);
      }
    }
  });
});
