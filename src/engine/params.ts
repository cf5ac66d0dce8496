/**
 * Parameter layout of the transformer: every tensor is a view into one flat `Float32Array`, so
 * weights, gradients and Adam moments are each a single buffer with the same layout.
 *
 * Per block: `ln1` (gain, bias), `attn.wqkv` [d×3d] and `attn.bqkv` [3d] (query, key and value
 * projections side by side), `attn.wo` [d×d], `attn.bo` [d], `ln2`, `mlp.w1` [d×4d], `mlp.b1`
 * [4d], `mlp.w2` [4d×d], `mlp.b2` [d]. Around the blocks: token embeddings `wte` [V×d], learned
 * positional embeddings `wpe` [C×d] and the final `lnf`. The output projection is tied to `wte`
 * (logits = h·wteᵀ), as in GPT-2.
 *
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "./config.js";
import type { Rng } from "./prng.js";

/** Views of one transformer block's tensors. */
export interface BlockTensors {
  ln1Gain: Float32Array;
  ln1Bias: Float32Array;
  wqkv: Float32Array;
  bqkv: Float32Array;
  wo: Float32Array;
  bo: Float32Array;
  ln2Gain: Float32Array;
  ln2Bias: Float32Array;
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: Float32Array;
}

/** Views of all tensors of a model (weights or gradients). */
export interface ModelTensors {
  /** The flat buffer all views point into. */
  flat: Float32Array;
  wte: Float32Array;
  wpe: Float32Array;
  blocks: BlockTensors[];
  lnfGain: Float32Array;
  lnfBias: Float32Array;
}

/** How a tensor is initialised. */
type Init = "normal" | "residual" | "zeros" | "ones";

interface TensorSpec {
  name: string;
  size: number;
  init: Init;
}

const BLOCK_KEYS = [
  "ln1Gain",
  "ln1Bias",
  "wqkv",
  "bqkv",
  "wo",
  "bo",
  "ln2Gain",
  "ln2Bias",
  "w1",
  "b1",
  "w2",
  "b2",
] as const;

function blockSpecs(d: number): Record<(typeof BLOCK_KEYS)[number], { size: number; init: Init }> {
  return {
    ln1Gain: { size: d, init: "ones" },
    ln1Bias: { size: d, init: "zeros" },
    wqkv: { size: d * 3 * d, init: "normal" },
    bqkv: { size: 3 * d, init: "zeros" },
    wo: { size: d * d, init: "residual" },
    bo: { size: d, init: "zeros" },
    ln2Gain: { size: d, init: "ones" },
    ln2Bias: { size: d, init: "zeros" },
    w1: { size: d * 4 * d, init: "normal" },
    b1: { size: 4 * d, init: "zeros" },
    w2: { size: 4 * d * d, init: "residual" },
    b2: { size: d, init: "zeros" },
  };
}

/** Every tensor in buffer order. */
function tensorSpecs(config: ResolvedModelConfig): TensorSpec[] {
  const d = config.dModel;
  const specs: TensorSpec[] = [
    { name: "wte", size: config.vocabSize * d, init: "normal" },
    { name: "wpe", size: config.contextLength * d, init: "normal" },
  ];
  for (let l = 0; l < config.nLayers; l++) {
    const block = blockSpecs(d);
    for (const key of BLOCK_KEYS) specs.push({ name: `blocks.${l}.${key}`, ...block[key] });
  }
  specs.push({ name: "lnfGain", size: d, init: "ones" }, { name: "lnfBias", size: d, init: "zeros" });
  return specs;
}

/** Number of floats of a model's parameter buffer. */
export function parameterCount(config: ResolvedModelConfig): number {
  return tensorSpecs(config).reduce((n, s) => n + s.size, 0);
}

/** Views of every tensor inside `flat` (which must hold {@link parameterCount} floats). */
export function tensorViews(flat: Float32Array, config: ResolvedModelConfig): ModelTensors {
  const views = new Map<string, Float32Array>();
  let offset = 0;
  for (const spec of tensorSpecs(config)) {
    views.set(spec.name, flat.subarray(offset, offset + spec.size));
    offset += spec.size;
  }
  const get = (name: string): Float32Array => views.get(name)!;
  const blocks: BlockTensors[] = [];
  for (let l = 0; l < config.nLayers; l++) {
    const block = {} as BlockTensors;
    for (const key of BLOCK_KEYS) block[key] = get(`blocks.${l}.${key}`);
    blocks.push(block);
  }
  return { flat, wte: get("wte"), wpe: get("wpe"), blocks, lnfGain: get("lnfGain"), lnfBias: get("lnfBias") };
}

/**
 * Fills `flat` with GPT-2 style initial weights: N(0, 0.02) for embeddings and projections,
 * N(0, 0.02/√(2·nLayers)) for the projections into the residual stream, zero biases, unit gains.
 */
export function initializeParameters(flat: Float32Array, config: ResolvedModelConfig, rng: Rng): void {
  const std = 0.02;
  const residualStd = std / Math.sqrt(2 * config.nLayers);
  let offset = 0;
  for (const spec of tensorSpecs(config)) {
    const view = flat.subarray(offset, offset + spec.size);
    offset += spec.size;
    if (spec.init === "ones") view.fill(1);
    else if (spec.init === "zeros") view.fill(0);
    else {
      const s = spec.init === "residual" ? residualStd : std;
      for (let i = 0; i < view.length; i++) view[i] = rng.normal() * s;
    }
  }
}
