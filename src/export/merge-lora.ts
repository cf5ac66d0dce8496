/**
 * Merging a PEFT LoRA adapter into a base model's safetensors on disk, tensor by tensor: each
 * file is read and written one tensor at a time (never the whole model in memory), in its own
 * dtype (BF16 or F32), with the same header, so every file of the base keeps its layout.
 * `W += (lora_alpha / r) · B @ A` (transposed for `fan_in_fan_out` weights such as GPT-2's `Conv1D`),
 * computed as the local engine materialises its LoRA weights (`addLoraProduct`), so merging a
 * `nexrl serve` adapter into its F32 base reproduces the served weights bit for bit.
 * @module
 * @internal
 */
import { copyFile, open, readdir, readFile, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { addLoraProduct } from "../engine/lora.js";
import { makeFolder } from "../engine/storage.js";
import { decodeSafetensors } from "../formats/safetensors.js";
import { InputError, storageError } from "../errors.js";

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

interface LoraPair {
  a: Float32Array;
  b: Float32Array;
  shapeA: number[];
  shapeB: number[];
  used: boolean;
}

function toFloats(bytes: Uint8Array, dtype: string, what: string): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === "F32") {
    const out = new Float32Array(bytes.length / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }
  if (dtype === "BF16") {
    const out = new Float32Array(bytes.length / 2);
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < out.length; i++) bits[i] = view.getUint16(i * 2, true) << 16;
    return out;
  }
  throw new InputError(`${what} is ${dtype}; merging reads F32 and BF16 tensors only`);
}

function fromFloats(values: Float32Array, dtype: string, into: Uint8Array): void {
  const view = new DataView(into.buffer, into.byteOffset, into.byteLength);
  if (dtype === "F32") {
    for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
    return;
  }
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < values.length; i++) {
    const u = bits[i]!;
    // Round to nearest, ties to even (NaN stays NaN: its top bits are kept).
    const rounded = (u & 0x7f800000) === 0x7f800000 ? u : u + 0x7fff + ((u >>> 16) & 1);
    view.setUint16(i * 2, rounded >>> 16, true);
  }
}

/** The safetensors files of a base model folder: `model.safetensors`, or those its index names. */
async function baseFiles(baseDir: string): Promise<string[]> {
  const names = await readdir(baseDir).catch((error: unknown) => {
    throw new InputError(`cannot read the base model folder ${baseDir}: ${(error as Error).message}`);
  });
  if (names.includes("model.safetensors.index.json")) {
    const index = JSON.parse(await readFile(join(baseDir, "model.safetensors.index.json"), "utf8")) as {
      weight_map?: Record<string, string>;
    };
    return [...new Set(Object.values(index.weight_map ?? {}))];
  }
  if (names.includes("model.safetensors")) return ["model.safetensors"];
  throw new InputError(
    `${baseDir} holds no model.safetensors nor model.safetensors.index.json; give the folder of a Hugging Face model`,
  );
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(out, done, length - done, position + done);
    if (bytesRead === 0) throw new InputError(`a safetensors file ends before its tensors do`);
    done += bytesRead;
  }
  return out;
}

/** Adds the adapter's change to `weight` (shape `[out, in]`, or `[in, out]` with `fanInFanOut`). */
function addDelta(
  weight: Float32Array,
  shape: number[],
  pair: LoraPair,
  scale: number,
  fanInFanOut: boolean,
  name: string,
): void {
  const [r, inDim] = pair.shapeA as [number, number];
  const [outDim] = pair.shapeB as [number, number];
  const expected = fanInFanOut ? [inDim, outDim] : [outDim, inDim];
  if (shape.length !== 2 || shape[0] !== expected[0] || shape[1] !== expected[1])
    throw new InputError(
      `base tensor ${name} has shape [${shape.join(", ")}], the adapter's change [${expected.join(", ")}]; is it the adapter's base model?`,
    );
  addLoraProduct(weight, pair.a, pair.b, r, scale, fanInFanOut);
}

/**
 * Writes the base model of `baseDir` with the adapter merged into `outDir`: every safetensors
 * file rewritten tensor by tensor, every other file of the folder copied. Returns the files written.
 * @throws {@link "nexrl/errors".InputError | InputError} for a base without safetensors, a dtype other than F32 / BF16, an
 * adapter module the base lacks, or mismatched shapes.
 */
export async function mergeLoraIntoBase(
  baseDir: string,
  adapterConfig: Record<string, unknown>,
  adapterSafetensors: Uint8Array,
  outDir: string,
): Promise<string[]> {
  const r = adapterConfig["r"];
  const alpha = adapterConfig["lora_alpha"];
  if (typeof r !== "number" || typeof alpha !== "number")
    throw new InputError("the adapter's config has no numeric r and lora_alpha");
  for (const key of ["rank_pattern", "alpha_pattern"]) {
    const pattern = adapterConfig[key];
    if (pattern && typeof pattern === "object" && Object.keys(pattern).length > 0)
      throw new InputError(`the adapter has a ${key}; merging supports one r and lora_alpha for every module`);
  }
  const scale = alpha / r;
  const fanInFanOut = adapterConfig["fan_in_fan_out"] === true;
  const pairs = new Map<string, LoraPair>();
  const parts = new Map<
    string,
    { a?: { shape: number[]; data: Float32Array }; b?: { shape: number[]; data: Float32Array } }
  >();
  for (const t of decodeSafetensors(adapterSafetensors, "adapter_model.safetensors").tensors) {
    const match = /^base_model\.model\.(.+)\.lora_([AB])\.weight$/.exec(t.name);
    if (!match) continue;
    const entry = parts.get(match[1]!) ?? {};
    entry[match[2] === "A" ? "a" : "b"] = {
      shape: t.shape,
      data: toFloats(t.bytes, t.dtype, `adapter tensor ${t.name}`),
    };
    parts.set(match[1]!, entry);
  }
  for (const [module, { a, b }] of parts) {
    if (!a || !b) throw new InputError(`the adapter has only one of lora_A and lora_B for ${module}`);
    pairs.set(module, { a: a.data, b: b.data, shapeA: a.shape, shapeB: b.shape, used: false });
  }
  /** The adapter module of base tensor `name` (`transformer.`-prefixed modules match GPT2Model's names too). */
  const pairOf = (name: string): LoraPair | undefined => {
    if (!name.endsWith(".weight")) return undefined;
    const module = name.slice(0, -".weight".length);
    return pairs.get(module) ?? pairs.get(`transformer.${module}`);
  };

  let path = outDir;
  const written: string[] = [];
  try {
    await makeFolder(outDir);
    const files = await baseFiles(baseDir);
    for (const name of await readdir(baseDir, { withFileTypes: true })) {
      if (!name.isFile() || files.includes(name.name)) continue;
      path = join(outDir, name.name);
      await copyFile(join(baseDir, name.name), path);
      written.push(path);
    }
    for (const file of files) {
      const input = await open(join(baseDir, file), "r");
      path = join(outDir, file);
      const output = await open(path, "w");
      try {
        const lengthBytes = await readAt(input, 0, 8);
        const length = Number(new DataView(lengthBytes.buffer).getBigUint64(0, true));
        const headerBytes = await readAt(input, 8, length);
        const header = JSON.parse(new TextDecoder().decode(headerBytes)) as Record<string, HeaderEntry>;
        await output.write(lengthBytes, 0, 8, 0);
        await output.write(headerBytes, 0, length, 8);
        const start = 8 + length;
        const tensors = Object.entries(header)
          .filter(([n]) => n !== "__metadata__")
          .sort(([, x], [, y]) => x.data_offsets[0] - y.data_offsets[0]);
        for (const [name, t] of tensors) {
          const [from, to] = t.data_offsets;
          const bytes = await readAt(input, start + from, to - from);
          const pair = pairOf(name);
          if (pair) {
            const weight = toFloats(bytes, t.dtype, `base tensor ${name}`);
            addDelta(weight, t.shape, pair, scale, fanInFanOut, name);
            fromFloats(weight, t.dtype, bytes);
            pair.used = true;
          }
          await output.write(bytes, 0, bytes.length, start + from);
        }
      } finally {
        await input.close();
        await output.close();
      }
      written.push(path);
    }
  } catch (error) {
    if (error instanceof InputError) throw error;
    throw storageError(path, error);
  }
  const missing = [...pairs].filter(([, p]) => !p.used).map(([m]) => m);
  if (missing.length > 0)
    throw new InputError(
      `the base model in ${baseDir} has no weight for adapter module${missing.length === 1 ? "" : "s"} ${missing.slice(0, 5).join(", ")}; is it the adapter's base model?`,
    );
  return written;
}
