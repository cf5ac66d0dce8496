/**
 * Independent readings of an exported model for the export tests: a safetensors reader and
 * GPT-2's forward pass in double precision, written from the formats' and the model's
 * definitions rather than taken from src/.
 */
import { expect } from "vitest";

/** GPT-2's `gelu_new`: the tanh approximation of GELU. */
export const tanhGelu = (v: number): number =>
  0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));

/** `x` rounded to the nearest IEEE half-precision value (ties to even; no overflow handling, |x| < 65520). */
function toHalf(x: number): number {
  if (x === 0) return 0;
  const a = Math.abs(x);
  const step = 2 ** (Math.max(Math.floor(Math.log2(a)), -14) - 10);
  const q = a / step;
  const low = Math.floor(q);
  const rounded = q - low > 0.5 || (q - low === 0.5 && low % 2 === 1) ? low + 1 : low;
  return Math.sign(x) * rounded * step;
}

/**
 * The tanh GELU as llama.cpp's CPU backend evaluates it (ggml-cpu's `ggml_vec_gelu_f32` with
 * `GGML_GELU_FP16`): 0 below -10, x above 10, else a lookup table indexed by x rounded to half
 * precision, holding the f32 GELU of that value rounded to half precision.
 */
export const ggmlTableGelu = (v: number): number =>
  v <= -10 ? 0 : v >= 10 ? v : toHalf(Math.fround(tanhGelu(toHalf(v))));

/** A tensor read from a safetensors file, in double precision. */
export interface Tensor {
  shape: number[];
  data: Float64Array;
}

/** An independent safetensors reader: the u64 header length, the JSON header, F32 data at its offsets. */
export function readSafetensors(bytes: Uint8Array): {
  tensors: Map<string, Tensor>;
  metadata: unknown;
  headerLength: number;
} {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const tensors = new Map<string, Tensor>();
  const base = 8 + headerLength;
  let expectedStart = 0;
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    expect(entry.dtype).toBe("F32");
    const [start, end] = entry.data_offsets;
    expect(start).toBe(expectedStart);
    expectedStart = end;
    const n = entry.shape.reduce((a, b) => a * b, 1);
    expect(end - start).toBe(4 * n);
    const data = new Float64Array(n);
    for (let i = 0; i < n; i++) data[i] = view.getFloat32(base + start + 4 * i, true);
    tensors.set(name, { shape: entry.shape, data });
  }
  expect(base + expectedStart).toBe(bytes.length);
  return { tensors, metadata: header.__metadata__, headerLength };
}

/**
 * GPT-2's forward pass, in double precision, straight from the Hugging Face tensors and config:
 * each position's next-token logprobs. `gelu` is the activation (default: GPT-2's tanh GELU).
 */
export function gpt2LogProbs(
  t: Map<string, Tensor>,
  cfg: Record<string, number>,
  tokens: number[],
  gelu: (v: number) => number = tanhGelu,
): number[][] {
  const d = cfg.n_embd!;
  const H = cfg.n_head!;
  const dh = d / H;
  const eps = cfg.layer_norm_epsilon!;
  const get = (name: string): Float64Array => t.get(name)!.data;
  const layerNorm = (x: number[], g: Float64Array, b: Float64Array): number[] => {
    const mean = x.reduce((a, v) => a + v, 0) / x.length;
    const variance = x.reduce((a, v) => a + (v - mean) ** 2, 0) / x.length;
    return x.map((v, j) => ((v - mean) / Math.sqrt(variance + eps)) * g[j]! + b[j]!);
  };
  // Conv1D: y = x·W + b with W [in, out].
  const conv1d = (x: number[], w: Float64Array, b: Float64Array): number[] => {
    const out = Array.from(b);
    for (let i = 0; i < x.length; i++) for (let o = 0; o < out.length; o++) out[o]! += x[i]! * w[i * out.length + o]!;
    return out;
  };
  const wte = get("wte.weight");
  const wpe = get("wpe.weight");
  let xs = tokens.map((tok, p) => Array.from({ length: d }, (_, j) => wte[tok * d + j]! + wpe[p * d + j]!));
  for (let l = 0; l < cfg.n_layer!; l++) {
    const h = (n: string): Float64Array => get(`h.${l}.${n}`);
    const qkv = xs.map((x) =>
      conv1d(layerNorm(x, h("ln_1.weight"), h("ln_1.bias")), h("attn.c_attn.weight"), h("attn.c_attn.bias")),
    );
    const attn = xs.map((_, i) => {
      const out = new Array<number>(d).fill(0);
      for (let head = 0; head < H; head++) {
        const q = qkv[i]!.slice(head * dh, (head + 1) * dh);
        const scores = qkv
          .slice(0, i + 1)
          .map((r) => q.reduce((a, v, c) => a + v * r[d + head * dh + c]!, 0) / Math.sqrt(dh));
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, v) => a + v, 0);
        for (let j = 0; j <= i; j++)
          for (let c = 0; c < dh; c++) out[head * dh + c]! += (e[j]! / sum) * qkv[j]![2 * d + head * dh + c]!;
      }
      return out;
    });
    xs = xs.map((x, i) => conv1d(attn[i]!, h("attn.c_proj.weight"), h("attn.c_proj.bias")).map((v, j) => v + x[j]!));
    xs = xs.map((x) => {
      const hidden = conv1d(
        layerNorm(x, h("ln_2.weight"), h("ln_2.bias")),
        h("mlp.c_fc.weight"),
        h("mlp.c_fc.bias"),
      ).map(gelu);
      return conv1d(hidden, h("mlp.c_proj.weight"), h("mlp.c_proj.bias")).map((v, j) => v + x[j]!);
    });
  }
  const V = cfg.vocab_size!;
  return xs.map((x) => {
    const y = layerNorm(x, get("ln_f.weight"), get("ln_f.bias"));
    // Tied embeddings: the LM head is wte.
    const logits = Array.from({ length: V }, (_, v) => y.reduce((a, yj, j) => a + yj * wte[v * d + j]!, 0));
    const max = Math.max(...logits);
    const lse = max + Math.log(logits.reduce((a, z) => a + Math.exp(z - max), 0));
    return logits.map((z) => z - lse);
  });
}
