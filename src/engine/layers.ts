/**
 * Row-wise layers of the transformer (layer norm, GELU, log-softmax) with their backward passes,
 * and the single-row causal attention of the decode step. The batched forward pass and the
 * decode step share the layer-norm and GELU code, so training and sampling compute the same
 * numbers up to the summation order of attention.
 *
 * @module
 * @internal
 */

/** Layer-norm epsilon. */
const LN_EPS = 1e-5;
/** √(2/π), of the tanh approximation of GELU. */
const GELU_C = Math.sqrt(2 / Math.PI);
const GELU_K = 0.044715;

/**
 * Layer norm of one row: y = x̂·gain + bias with x̂ = (x − mean)·rstd. Writes x̂ to `xhat` when
 * given (training keeps it for the backward pass) and returns rstd.
 */
export function layerNormRow(
  y: Float32Array,
  xhat: Float32Array | null,
  x: Float32Array,
  off: number,
  gain: Float32Array,
  bias: Float32Array,
  d: number,
): number {
  let mean = 0;
  for (let j = 0; j < d; j++) mean += x[off + j]!;
  mean /= d;
  let variance = 0;
  for (let j = 0; j < d; j++) {
    const c = x[off + j]! - mean;
    variance += c * c;
  }
  const rstd = 1 / Math.sqrt(variance / d + LN_EPS);
  for (let j = 0; j < d; j++) {
    const h = (x[off + j]! - mean) * rstd;
    if (xhat) xhat[off + j] = h;
    y[off + j] = h * gain[j]! + bias[j]!;
  }
  return rstd;
}

/** Layer norm of every row of x[rows×d], keeping x̂ and rstd for {@link layerNormBackward}. */
export function layerNormForward(
  y: Float32Array,
  xhat: Float32Array,
  rstd: Float32Array,
  x: Float32Array,
  gain: Float32Array,
  bias: Float32Array,
  rows: number,
  d: number,
): void {
  for (let r = 0; r < rows; r++) rstd[r] = layerNormRow(y, xhat, x, r * d, gain, bias, d);
}

/**
 * Backward of {@link layerNormForward}: accumulates dgain and dbias, and adds (or writes, when
 * `accumulate` is false) dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) with dx̂ = dy·gain.
 * `acc` is scratch of at least 2·d doubles.
 */
export function layerNormBackward(
  dx: Float32Array,
  dy: Float32Array,
  xhat: Float32Array,
  rstd: Float32Array,
  gain: Float32Array,
  dGain: Float32Array,
  dBias: Float32Array,
  rows: number,
  d: number,
  accumulate: boolean,
  acc: Float64Array,
): void {
  acc.fill(0, 0, 2 * d);
  for (let r = 0; r < rows; r++) {
    const o = r * d;
    let m1 = 0;
    let m2 = 0;
    for (let j = 0; j < d; j++) {
      const g = dy[o + j]!;
      const h = xhat[o + j]!;
      acc[j] = acc[j]! + g * h;
      acc[d + j] = acc[d + j]! + g;
      const dh = g * gain[j]!;
      m1 += dh;
      m2 += dh * h;
    }
    m1 /= d;
    m2 /= d;
    const s = rstd[r]!;
    for (let j = 0; j < d; j++) {
      const v = s * (dy[o + j]! * gain[j]! - m1 - xhat[o + j]! * m2);
      dx[o + j] = accumulate ? dx[o + j]! + v : v;
    }
  }
  for (let j = 0; j < d; j++) {
    dGain[j] = dGain[j]! + acc[j]!;
    dBias[j] = dBias[j]! + acc[d + j]!;
  }
}

/**
 * tanh as a rational function (the minimax approximation of Eigen's float `ptanh`), within
 * 3e-7 of `Math.tanh` and several times faster; pure arithmetic, so identical on every platform.
 */
function fastTanh(v: number): number {
  const x = v > 7.99881172180175781 ? 7.99881172180175781 : v < -7.99881172180175781 ? -7.99881172180175781 : v;
  const x2 = x * x;
  let p = -2.76076847742355e-16;
  p = p * x2 + 2.00018790482477e-13;
  p = p * x2 - 8.60467152213735e-11;
  p = p * x2 + 5.12229709037114e-8;
  p = p * x2 + 1.48572235717979e-5;
  p = p * x2 + 6.37261928875436e-4;
  p = p * x2 + 4.89352455891786e-3;
  let q = 1.19825839466702e-6;
  q = q * x2 + 1.18534705686654e-4;
  q = q * x2 + 2.268434632439e-3;
  q = q * x2 + 4.89352518554385e-3;
  return (x * p) / q;
}

/** out[i] = GELU(x[i]) for i < n (tanh approximation, as in GPT-2); `out` may be `x`. */
export function geluForward(out: Float32Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    out[i] = 0.5 * v * (1 + fastTanh(GELU_C * (v + GELU_K * v * v * v)));
  }
}

/** grad[i] *= GELU′(x[i]) for i < n. */
export function geluBackward(grad: Float32Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    const t = fastTanh(GELU_C * (v + GELU_K * v * v * v));
    const dt = (1 - t * t) * GELU_C * (1 + 3 * GELU_K * v * v);
    grad[i] = grad[i]! * (0.5 * (1 + t) + 0.5 * v * dt);
  }
}

/**
 * Softmax attention weights of one query row of one head over `count` keys.
 *
 * The query is q[qOff..qOff+dh); the first key is at keys[kOff..], successive keys `stride`
 * apart. Writes the weights to probs[pOff..pOff+count).
 */
function attentionWeights(
  q: Float32Array,
  qOff: number,
  keys: Float32Array,
  kOff: number,
  stride: number,
  count: number,
  dh: number,
  scale: number,
  probs: Float32Array,
  pOff: number,
): void {
  let max = -Infinity;
  for (let j = 0; j < count; j++) {
    const k = kOff + j * stride;
    let s = 0;
    for (let c = 0; c < dh; c++) s += q[qOff + c]! * keys[k + c]!;
    s *= scale;
    probs[pOff + j] = s;
    if (s > max) max = s;
  }
  let sum = 0;
  for (let j = 0; j < count; j++) {
    const e = Math.exp(probs[pOff + j]! - max);
    probs[pOff + j] = e;
    sum += e;
  }
  const inv = 1 / sum;
  for (let j = 0; j < count; j++) probs[pOff + j] = probs[pOff + j]! * inv;
}

/**
 * Causal attention of one query row of one head: {@link attentionWeights}, then the weighted sum
 * of values into out[outOff..outOff+dh). Key j is at keys[kOff + j·stride..], value j at
 * values[vOff + j·stride..]. `probs` is scratch of at least `count` floats.
 */
export function attendRow(
  q: Float32Array,
  qOff: number,
  keys: Float32Array,
  kOff: number,
  values: Float32Array,
  vOff: number,
  stride: number,
  count: number,
  dh: number,
  scale: number,
  probs: Float32Array,
  out: Float32Array,
  outOff: number,
): void {
  attentionWeights(q, qOff, keys, kOff, stride, count, dh, scale, probs, 0);
  out.fill(0, outOff, outOff + dh);
  for (let j = 0; j < count; j++) {
    const p = probs[j]!;
    const v = vOff + j * stride;
    for (let c = 0; c < dh; c++) out[outOff + c] = out[outOff + c]! + p * values[v + c]!;
  }
}

/**
 * Causal softmax of attention scores, in place over p[len×len]: row i becomes
 * p[i,j] = exp(s_j − max s) / Σ_{j′≤i} exp(s_j′ − max s) with s_j = scale·p[i,j] for j ≤ i, and 0
 * for j > i (the sum in double precision).
 */
export function causalSoftmax(p: Float32Array, len: number, scale: number): void {
  for (let i = 0; i < len; i++) {
    const row = i * len;
    let max = -Infinity;
    for (let j = 0; j <= i; j++) {
      const s = p[row + j]! * scale;
      p[row + j] = s;
      if (s > max) max = s;
    }
    let sum = 0;
    for (let j = 0; j <= i; j++) {
      const e = Math.exp(p[row + j]! - max);
      p[row + j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j <= i; j++) p[row + j] = p[row + j]! * inv;
    p.fill(0, row + i + 1, row + len);
  }
}

/**
 * Backward of {@link causalSoftmax}, in place over dp[len×len] (the gradient of its output p):
 * dS[i,j] = p[i,j]·(dp[i,j] − Σ_{j′≤i} p[i,j′]·dp[i,j′])·scale for j ≤ i, and 0 for j > i.
 */
export function causalSoftmaxBackward(dp: Float32Array, p: Float32Array, len: number, scale: number): void {
  for (let i = 0; i < len; i++) {
    const row = i * len;
    let dot = 0;
    for (let j = 0; j <= i; j++) dot += p[row + j]! * dp[row + j]!;
    for (let j = 0; j <= i; j++) dp[row + j] = p[row + j]! * (dp[row + j]! - dot) * scale;
    dp.fill(0, row + i + 1, row + len);
  }
}

/** log Σ exp(x[off..off+n)), computed in double precision. */
export function logSumExp(x: Float32Array, off: number, n: number): number {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[off + i]! > max) max = x[off + i]!;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(x[off + i]! - max);
  return max + Math.log(sum);
}
