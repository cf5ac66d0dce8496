/**
 * LoRA training of the local engine: the base weights stay frozen and only rank-r factors of
 * every block's four projections are trained (GPT-2's `attn.c_attn`, `attn.c_proj`, `mlp.c_fc`,
 * `mlp.c_proj`; embeddings, layer norms and biases are frozen too, as in Tinker's LoRA).
 *
 * A projection's weight is a GPT-2 `Conv1D` weight W [in × out] (y = x·W + b). With the factors
 * stored as PEFT stores them, `lora_A` [r × in] and `lora_B` [out × r], and s = alpha / r:
 *
 * ```
 * W  = W0 + s · (lora_B · lora_A)ᵀ            i.e. W[i][o] = W0[i][o] + s · Σₖ lora_B[o][k] · lora_A[k][i]
 * ∂L/∂lora_A[k][i] = s · Σₒ lora_B[o][k] · G[i][o]      (G = ∂L/∂W, what the backward pass computes)
 * ∂L/∂lora_B[o][k] = s · Σᵢ lora_A[k][i] · G[i][o]
 * ```
 *
 * The engine keeps the effective W in its ordinary weight buffer (materialised after every
 * optimizer step, at in·out·r multiply-adds per projection), so forward, backward and sampling
 * run the full-weight kernels unchanged; the accumulated G is turned into the factors'
 * gradients by the chain rule above when the optimizer steps (it is linear, so projecting the
 * sum of several passes equals summing their projections). `lora_A` starts as PEFT's
 * `kaiming_uniform_(a=√5)`, uniform in ±1/√in (drawn from the engine's seeded generator after
 * the base weights); `lora_B` starts at zero, so the initial model is the base model. An
 * optimizer step thus costs 3·in·out·r multiply-adds per projection on the engine's calling
 * thread, in TypeScript (about 0.1 s for `small` and 0.5 s for `medium` at rank 32 on one core;
 * the factors live outside the engine's kernel memory).
 *
 * Materialising computes exactly what `mergeLoraIntoBase` computes for a `fan_in_fan_out`
 * adapter (one shared function, {@link addLoraProduct}), so merging an exported adapter into the
 * base weights reproduces the engine's weights bit for bit.
 *
 * @module
 */
import type { ResolvedModelConfig } from "./config.js";
import type { ModelTensors } from "./params.js";
import type { Rng } from "./prng.js";
import { ConfigError } from "../errors.js";

/** LoRA training of the local engine (`LocalEngine.create`'s `lora`): the rank and scale of the trained factors. */
export interface LoraOptions {
  /** Rank r of every factor pair: an integer from 1 to the model's `dModel`. */
  rank: number;
  /** The scale's numerator: the update is (alpha / rank) · B·A (default 32, PEFT's `lora_alpha`). */
  alpha?: number;
}

/** {@link LoraOptions} with the default filled in. */
export type ResolvedLora = Required<LoraOptions>;

/** Default `alpha` of {@link LoraOptions}. */
const DEFAULT_ALPHA = 32;

/**
 * Validates `lora` for a model of `config`.
 * @throws {@link "nexrl".ConfigError | ConfigError} for a rank that is not an integer in [1, dModel], or a non-positive alpha.
 */
export function resolveLora(lora: LoraOptions, config: ResolvedModelConfig): ResolvedLora {
  const { rank } = lora;
  const alpha = lora.alpha ?? DEFAULT_ALPHA;
  if (!Number.isSafeInteger(rank) || rank < 1 || rank > config.dModel)
    throw new ConfigError(
      `lora rank must be an integer from 1 to the model's dModel (${config.dModel}, the smaller side of attn.c_proj), got ${String(rank)}`,
    );
  if (typeof alpha !== "number" || !Number.isFinite(alpha) || alpha <= 0)
    throw new ConfigError(`lora alpha must be a positive number, got ${String(alpha)}`);
  return { rank, alpha };
}

/** One adapted projection: its PEFT module name, its shape and where its weight lives. */
export interface LoraTarget {
  /** GPT-2 module name, e.g. `transformer.h.0.attn.c_attn`. */
  module: string;
  inDim: number;
  outDim: number;
  /** The projection's weight [in × out] among `tensors`. */
  weight: (tensors: ModelTensors) => Float32Array;
}

/** The adapted projections in adapter order: per block `attn.c_attn`, `attn.c_proj`, `mlp.c_fc`, `mlp.c_proj`. */
export function loraTargets(config: ResolvedModelConfig): LoraTarget[] {
  const d = config.dModel;
  return Array.from({ length: config.nLayers }, (_, l): LoraTarget[] => {
    const p = `transformer.h.${l}`;
    return [
      { module: `${p}.attn.c_attn`, inDim: d, outDim: 3 * d, weight: (t) => t.blocks[l]!.wqkv },
      { module: `${p}.attn.c_proj`, inDim: d, outDim: d, weight: (t) => t.blocks[l]!.wo },
      { module: `${p}.mlp.c_fc`, inDim: d, outDim: 4 * d, weight: (t) => t.blocks[l]!.w1 },
      { module: `${p}.mlp.c_proj`, inDim: 4 * d, outDim: d, weight: (t) => t.blocks[l]!.w2 },
    ];
  }).flat();
}

/** Floats of all factors of a model at `rank`: Σ r·(in + out). */
function loraFactorCount(config: ResolvedModelConfig, rank: number): number {
  return loraTargets(config).reduce((n, t) => n + rank * (t.inDim + t.outDim), 0);
}

/** Floats of the frozen base weights of the adapted projections: Σ in·out. */
function loraBaseCount(config: ResolvedModelConfig): number {
  return loraTargets(config).reduce((n, t) => n + t.inDim * t.outDim, 0);
}

/**
 * Bytes a LoRA engine of `config` holds besides a full-weight engine's buffers: the factors,
 * their gradients and Adam moments and the base (float32), and the chain rule's float64 scratch.
 */
export function loraBytes(config: ResolvedModelConfig, rank: number): number {
  const { most, side } = scratchSizes(loraTargets(config));
  return (4 * loraFactorCount(config, rank) + loraBaseCount(config)) * 4 + (2 * most + 2 * rank * side) * 8;
}

/** The largest in·out and the largest side of `targets`: what the chain rule's scratch holds. */
function scratchSizes(targets: readonly LoraTarget[]): { most: number; side: number } {
  let most = 0;
  let side = 0;
  for (const t of targets) {
    most = Math.max(most, t.inDim * t.outDim);
    side = Math.max(side, t.inDim, t.outDim);
  }
  return { most, side };
}

/** Σₖ x[xi + k] · y[yi + k] over k < n, in float64, in four interleaved partial sums. */
function dot(x: Float64Array, xi: number, y: Float64Array, yi: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let k = 0;
  for (; k + 3 < n; k += 4) {
    s0 += x[xi + k]! * y[yi + k]!;
    s1 += x[xi + k + 1]! * y[yi + k + 1]!;
    s2 += x[xi + k + 2]! * y[yi + k + 2]!;
    s3 += x[xi + k + 3]! * y[yi + k + 3]!;
  }
  for (; k < n; k++) s0 += x[xi + k]! * y[yi + k]!;
  return s0 + s1 + (s2 + s3);
}

/**
 * Adds `scale · (b · a)ᵀ` (a: `lora_A` [r × in], b: `lora_B` [out × r]) to `weight`, stored
 * [in × out] with `fanInFanOut`, else [out × in]: each element's sum over the rank in float64
 * (four interleaved partial sums), then added to the weight and rounded to float32 once.
 */
export function addLoraProduct(
  weight: Float32Array,
  a: Float32Array,
  b: Float32Array,
  r: number,
  scale: number,
  fanInFanOut: boolean,
): void {
  const inDim = a.length / r;
  const outDim = b.length / r;
  // Both operands rank-minor, so the innermost loop reads them in order.
  const scaled = new Float64Array(outDim * r);
  for (let n = 0; n < scaled.length; n++) scaled[n] = b[n]! * scale;
  const at = new Float64Array(inDim * r);
  for (let k = 0; k < r; k++) for (let i = 0; i < inDim; i++) at[i * r + k] = a[k * inDim + i]!;
  for (let i = 0; i < inDim; i++) {
    const ai = i * r;
    for (let o = 0; o < outDim; o++) {
      const bo = o * r;
      const sum = dot(scaled, bo, at, ai, r);
      const w = fanInFanOut ? i * outDim + o : o * inDim + i;
      weight[w] = Math.fround(weight[w]! + sum);
    }
  }
}

/** The factors (and their gradients and frozen base weights) of one LoRA model. */
export class LoraState {
  /** Per target, `lora_A` [r × in] then `lora_B` [out × r]; the parameters the optimizer trains. */
  readonly factors: Float32Array;
  /** Their accumulated gradients (filled by {@link LoraState.gradientsFrom}). */
  readonly grads: Float32Array;
  /** Per target, its frozen base weight W0 [in × out]. */
  readonly base: Float32Array;
  /** The adapted projections. */
  readonly targets: LoraTarget[];
  /** alpha / rank. */
  readonly scale: number;
  /** Float64 copies of one target's G, Gᵀ, lora_A and lora_Bᵀ (sized for the largest), reused every step. */
  private readonly scratch: { g64: Float64Array; gt: Float64Array; a64: Float64Array; bt: Float64Array };
  private readonly factorOffsets: number[] = [];
  private readonly baseOffsets: number[] = [];

  /**
   * Factors for the model whose initial weights `weights` holds (they become the base): `lora_A`
   * drawn from `rng`, `lora_B` zero.
   */
  constructor(
    config: ResolvedModelConfig,
    readonly lora: ResolvedLora,
    weights: ModelTensors,
    rng: Rng,
  ) {
    this.targets = loraTargets(config);
    this.scale = lora.alpha / lora.rank;
    let f = 0;
    let b = 0;
    for (const t of this.targets) {
      this.factorOffsets.push(f);
      this.baseOffsets.push(b);
      f += lora.rank * (t.inDim + t.outDim);
      b += t.inDim * t.outDim;
    }
    const { most, side } = scratchSizes(this.targets);
    this.scratch = {
      g64: new Float64Array(most),
      gt: new Float64Array(most),
      a64: new Float64Array(lora.rank * side),
      bt: new Float64Array(lora.rank * side),
    };
    this.factors = new Float32Array(f);
    this.grads = new Float32Array(f);
    this.base = new Float32Array(b);
    this.targets.forEach((t, n) => {
      this.base.set(t.weight(weights), this.baseOffsets[n]);
      const { a } = this.factorsOf(n, this.factors);
      const bound = 1 / Math.sqrt(t.inDim);
      for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
    });
  }

  /** Views of target `n`'s `lora_A` and `lora_B` inside `buffer` (the factors or their gradients). */
  factorsOf(n: number, buffer: Float32Array): { a: Float32Array; b: Float32Array } {
    const t = this.targets[n]!;
    const r = this.lora.rank;
    const at = this.factorOffsets[n]!;
    return {
      a: buffer.subarray(at, at + r * t.inDim),
      b: buffer.subarray(at + r * t.inDim, at + r * (t.inDim + t.outDim)),
    };
  }

  /** Target `n`'s base weight. */
  baseOf(n: number): Float32Array {
    const t = this.targets[n]!;
    const at = this.baseOffsets[n]!;
    return this.base.subarray(at, at + t.inDim * t.outDim);
  }

  /** Writes W0 + s·(B·A)ᵀ of every target into `weights`. */
  materialize(weights: ModelTensors): void {
    this.targets.forEach((t, n) => {
      const w = t.weight(weights);
      w.set(this.baseOf(n));
      const { a, b } = this.factorsOf(n, this.factors);
      addLoraProduct(w, a, b, this.lora.rank, this.scale, true);
    });
  }

  /** Adds the factors' gradients for the weight gradients `grads` (the chain rule of the module comment). */
  gradientsFrom(grads: ModelTensors): void {
    const r = this.lora.rank;
    const s = this.scale;
    this.targets.forEach((t, n) => {
      const { inDim, outDim } = t;
      const g = t.weight(grads);
      const { a, b } = this.factorsOf(n, this.factors);
      const { a: da, b: db } = this.factorsOf(n, this.grads);
      // Every sum as a dot product of two rows read in order: G [in × out] and Gᵀ, lora_A's
      // rows [r × in] and lora_Bᵀ [r × out], all in float64.
      const { g64, gt, a64, bt } = this.scratch;
      g64.set(g);
      for (let i = 0; i < inDim; i++) for (let o = 0; o < outDim; o++) gt[o * inDim + i] = g64[i * outDim + o]!;
      a64.set(a);
      for (let o = 0; o < outDim; o++) for (let k = 0; k < r; k++) bt[k * outDim + o] = b[o * r + k]!;
      for (let k = 0; k < r; k++)
        for (let i = 0; i < inDim; i++) da[k * inDim + i]! += s * dot(bt, k * outDim, g64, i * outDim, outDim);
      for (let o = 0; o < outDim; o++)
        for (let k = 0; k < r; k++) db[o * r + k]! += s * dot(gt, o * inDim, a64, k * inDim, inDim);
    });
  }
}
