/**
 * The TypeScript compute kernels of the local engine over row-major `Float32Array` matrices:
 * the fallback where WebAssembly SIMD is unavailable (or `kernels: "js"` is asked for), and the
 * reference the WebAssembly kernels (`wasm/kernels.wat`, behind `matrix.ts`) are tested against.
 * With one thread they compute exactly what the single-threaded engine computed before threads
 * and WebAssembly existed. Every kernel reads its operands from index 0 of the arrays passed (pass `subarray` views for
 * offsets) and never allocates in its loops; the transposed product borrows a module-level
 * scratch buffer that grows on demand.
 *
 * Speed comes from loop order and register blocking, not from cleverness: products are computed
 * either as row-times-matrix updates over contiguous output rows (i-k-j order) or as dot products
 * of contiguous rows, with two output rows and four reduction steps (or four output columns) per
 * inner loop so that every loaded value is used several times.
 *
 * @module
 * @internal
 */

let scratch = new Float32Array(0);

/** A scratch buffer of at least `size` floats, reused across calls (contents undefined). */
function borrowScratch(size: number): Float32Array {
  if (scratch.length < size) scratch = new Float32Array(size);
  return scratch;
}

/**
 * C[m×n] = A[m×k]·B[k×n], or C += A·B when `accumulate` is true.
 * Two rows of C at a time, four steps of k per pass over a row of B.
 */
export function matmulNN(
  c: Float32Array,
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
  accumulate: boolean,
): void {
  if (!accumulate) c.fill(0, 0, m * n);
  let i = 0;
  for (; i + 1 < m; i += 2) {
    const c0 = i * n;
    const c1 = c0 + n;
    const r0 = i * k;
    const r1 = r0 + k;
    let p = 0;
    for (; p + 3 < k; p += 4) {
      const x0 = a[r0 + p]!,
        x1 = a[r0 + p + 1]!,
        x2 = a[r0 + p + 2]!,
        x3 = a[r0 + p + 3]!;
      const y0 = a[r1 + p]!,
        y1 = a[r1 + p + 1]!,
        y2 = a[r1 + p + 2]!,
        y3 = a[r1 + p + 3]!;
      const b0 = p * n,
        b1 = b0 + n,
        b2 = b1 + n,
        b3 = b2 + n;
      for (let j = 0; j < n; j++) {
        const v0 = b[b0 + j]!,
          v1 = b[b1 + j]!,
          v2 = b[b2 + j]!,
          v3 = b[b3 + j]!;
        c[c0 + j] = c[c0 + j]! + (x0 * v0 + x1 * v1 + x2 * v2 + x3 * v3);
        c[c1 + j] = c[c1 + j]! + (y0 * v0 + y1 * v1 + y2 * v2 + y3 * v3);
      }
    }
    for (; p < k; p++) {
      const x = a[r0 + p]!,
        y = a[r1 + p]!;
      const b0 = p * n;
      for (let j = 0; j < n; j++) {
        const v = b[b0 + j]!;
        c[c0 + j] = c[c0 + j]! + x * v;
        c[c1 + j] = c[c1 + j]! + y * v;
      }
    }
  }
  if (i < m) rowTimesMatrix(c, i * n, a, i * k, b, k, n);
}

/**
 * c[cOff..cOff+n) += a[aOff..aOff+k)·B[k×n]: one row of {@link matmulNN}, with the same
 * summation order, so a single-token decode step reproduces the batched forward pass exactly.
 */
export function rowTimesMatrix(
  c: Float32Array,
  cOff: number,
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  k: number,
  n: number,
): void {
  let p = 0;
  for (; p + 3 < k; p += 4) {
    const x0 = a[aOff + p]!,
      x1 = a[aOff + p + 1]!,
      x2 = a[aOff + p + 2]!,
      x3 = a[aOff + p + 3]!;
    const b0 = p * n,
      b1 = b0 + n,
      b2 = b1 + n,
      b3 = b2 + n;
    for (let j = 0; j < n; j++) {
      c[cOff + j] = c[cOff + j]! + (x0 * b[b0 + j]! + x1 * b[b1 + j]! + x2 * b[b2 + j]! + x3 * b[b3 + j]!);
    }
  }
  for (; p < k; p++) {
    const x = a[aOff + p]!;
    const b0 = p * n;
    for (let j = 0; j < n; j++) c[cOff + j] = c[cOff + j]! + x * b[b0 + j]!;
  }
}

/**
 * C[m×n] = A[m×k]·B[n×k]ᵀ, or C += A·Bᵀ when `accumulate` is true: dot products of contiguous
 * rows, two rows of A against four rows of B at a time.
 */
export function matmulNT(
  c: Float32Array,
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
  accumulate: boolean,
): void {
  let i = 0;
  for (; i + 1 < m; i += 2) {
    const r0 = i * k;
    const r1 = r0 + k;
    const c0 = i * n;
    const c1 = c0 + n;
    let j = 0;
    for (; j + 3 < n; j += 4) {
      const b0 = j * k,
        b1 = b0 + k,
        b2 = b1 + k,
        b3 = b2 + k;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0,
        t0 = 0,
        t1 = 0,
        t2 = 0,
        t3 = 0;
      for (let p = 0; p < k; p++) {
        const x = a[r0 + p]!,
          y = a[r1 + p]!;
        const v0 = b[b0 + p]!,
          v1 = b[b1 + p]!,
          v2 = b[b2 + p]!,
          v3 = b[b3 + p]!;
        s0 += x * v0;
        s1 += x * v1;
        s2 += x * v2;
        s3 += x * v3;
        t0 += y * v0;
        t1 += y * v1;
        t2 += y * v2;
        t3 += y * v3;
      }
      if (accumulate) {
        c[c0 + j] = c[c0 + j]! + s0;
        c[c0 + j + 1] = c[c0 + j + 1]! + s1;
        c[c0 + j + 2] = c[c0 + j + 2]! + s2;
        c[c0 + j + 3] = c[c0 + j + 3]! + s3;
        c[c1 + j] = c[c1 + j]! + t0;
        c[c1 + j + 1] = c[c1 + j + 1]! + t1;
        c[c1 + j + 2] = c[c1 + j + 2]! + t2;
        c[c1 + j + 3] = c[c1 + j + 3]! + t3;
      } else {
        c[c0 + j] = s0;
        c[c0 + j + 1] = s1;
        c[c0 + j + 2] = s2;
        c[c0 + j + 3] = s3;
        c[c1 + j] = t0;
        c[c1 + j + 1] = t1;
        c[c1 + j + 2] = t2;
        c[c1 + j + 3] = t3;
      }
    }
    for (; j < n; j++) {
      const b0 = j * k;
      let s = 0,
        t = 0;
      for (let p = 0; p < k; p++) {
        const v = b[b0 + p]!;
        s += a[r0 + p]! * v;
        t += a[r1 + p]! * v;
      }
      c[c0 + j] = accumulate ? c[c0 + j]! + s : s;
      c[c1 + j] = accumulate ? c[c1 + j]! + t : t;
    }
  }
  if (i < m) rowTimesMatrixT(c, i * n, a, i * k, b, k, n, accumulate);
}

/**
 * c[cOff..cOff+n) = a[aOff..aOff+k)·B[n×k]ᵀ (or += when `accumulate`): one row of
 * {@link matmulNT}, four rows of B at a time, with the same summation order.
 */
export function rowTimesMatrixT(
  c: Float32Array,
  cOff: number,
  a: Float32Array,
  aOff: number,
  b: Float32Array,
  k: number,
  n: number,
  accumulate: boolean,
): void {
  let j = 0;
  for (; j + 3 < n; j += 4) {
    const b0 = j * k,
      b1 = b0 + k,
      b2 = b1 + k,
      b3 = b2 + k;
    let s0 = 0,
      s1 = 0,
      s2 = 0,
      s3 = 0;
    for (let p = 0; p < k; p++) {
      const x = a[aOff + p]!;
      s0 += x * b[b0 + p]!;
      s1 += x * b[b1 + p]!;
      s2 += x * b[b2 + p]!;
      s3 += x * b[b3 + p]!;
    }
    if (accumulate) {
      c[cOff + j] = c[cOff + j]! + s0;
      c[cOff + j + 1] = c[cOff + j + 1]! + s1;
      c[cOff + j + 2] = c[cOff + j + 2]! + s2;
      c[cOff + j + 3] = c[cOff + j + 3]! + s3;
    } else {
      c[cOff + j] = s0;
      c[cOff + j + 1] = s1;
      c[cOff + j + 2] = s2;
      c[cOff + j + 3] = s3;
    }
  }
  for (; j < n; j++) {
    const b0 = j * k;
    let s = 0;
    for (let p = 0; p < k; p++) s += a[aOff + p]! * b[b0 + p]!;
    c[cOff + j] = accumulate ? c[cOff + j]! + s : s;
  }
}

/**
 * C[k×n] += A[m×k]ᵀ·B[m×n] (weight gradients: Xᵀ·dY). Both operands are first transposed
 * into scratch, so the product runs as {@link matmulNT} over long contiguous rows of length m.
 */
export function matmulTN(c: Float32Array, a: Float32Array, b: Float32Array, m: number, k: number, n: number): void {
  const buf = borrowScratch(m * (k + n));
  const at = buf.subarray(0, m * k);
  const bt = buf.subarray(m * k, m * (k + n));
  transpose(at, a, m, k);
  transpose(bt, b, m, n);
  matmulNT(c, at, bt, k, m, n, true);
}

/** dst[cols×rows] = src[rows×cols]ᵀ, in tiles of 16×16 to keep both sides in cache. */
export function transpose(dst: Float32Array, src: Float32Array, rows: number, cols: number): void {
  const tile = 16;
  for (let r0 = 0; r0 < rows; r0 += tile) {
    const r1 = Math.min(r0 + tile, rows);
    for (let c0 = 0; c0 < cols; c0 += tile) {
      const c1 = Math.min(c0 + tile, cols);
      for (let r = r0; r < r1; r++) {
        const s = r * cols;
        for (let col = c0; col < c1; col++) dst[col * rows + r] = src[s + col]!;
      }
    }
  }
}

/** Sets every row of y[rows×cols] to `row` (bias initialisation before an accumulating product). */
export function fillRows(y: Float32Array, row: Float32Array, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) y.set(row.subarray(0, cols), r * cols);
}

/** Adds `row` to every row of y[rows×cols]. */
export function addToRows(y: Float32Array, row: Float32Array, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    for (let j = 0; j < cols; j++) y[o + j] = y[o + j]! + row[j]!;
  }
}

/** out[j] += Σ_r x[r×cols + j] (bias gradients), summed in double precision. */
export function addColumnSums(out: Float32Array, x: Float32Array, rows: number, cols: number, acc: Float64Array): void {
  acc.fill(0, 0, cols);
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    for (let j = 0; j < cols; j++) acc[j] = acc[j]! + x[o + j]!;
  }
  for (let j = 0; j < cols; j++) out[j] = out[j]! + acc[j]!;
}
