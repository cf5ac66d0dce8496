/**
 * The binary format of training states (`.nxs`) and sampler snapshots (`.nxw`).
 *
 * ```
 * offset  size  field
 * 0       8     magic "NXRLSTAT"
 * 8       4     format version (u32 LE), currently 1
 * 12      4     header length H in bytes (u32 LE, a multiple of 4)
 * 16      4     CRC-32 of every byte from offset 20 to the end (u32 LE)
 * 20      H     header: UTF-8 JSON padded with spaces —
 *               { kind, tokenizer, config, parameterCount, step, sections: [{ name, floats }] }
 * 20+H    …     sections in header order, float32 little-endian
 * ```
 *
 * Sections are `weights`, then for a state saved with its optimizer `adam_m` and `adam_v`. A
 * LoRA model's file (its header has `lora: { rank, alpha }`) holds its effective weights in
 * `weights`, then `lora_factors` (per adapted projection `lora_A` [r × in] then `lora_B`
 * [out × r], see `lora.ts`) and `lora_base` (the frozen W0 of those projections), then its
 * optimizer's moments, which are the factors' (one float per factor).
 *
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "./config.js";
import { crc32 } from "./crc32.js";
import { EngineError, type StateFileProblem } from "../errors.js";

const MAGIC = "NXRLSTAT";
const VERSION = 1;
const PREAMBLE = 20;

/** What a file holds: a full training state, or weights for sampling. */
export type StateFileKind = "training_state" | "sampler_weights";

/** Decoded contents of a state or snapshot file. */
export interface StateFileContents {
  kind: StateFileKind;
  config: ResolvedModelConfig;
  weights: Float32Array;
  /** Adam moments and step count, when saved. */
  optimizer: { m: Float32Array; v: Float32Array; step: number } | null;
  /** A LoRA model's rank, alpha, trained factors and frozen base projections; null for a full-weight model. */
  lora: StateFileLora | null;
}

/** The LoRA part of a {@link StateFileContents}. */
export interface StateFileLora {
  rank: number;
  alpha: number;
  /** `lora_factors`: per adapted projection, `lora_A` [r × in] then `lora_B` [out × r]. */
  factors: Float32Array;
  /** `lora_base`: per adapted projection, its frozen base weight [in × out]. */
  base: Float32Array;
}

interface Header {
  kind: StateFileKind;
  tokenizer: "byte";
  config: ResolvedModelConfig;
  parameterCount: number;
  step: number;
  /** Present for a LoRA model only (so full-weight files are as they were). */
  lora?: { rank: number; alpha: number };
  sections: Array<{ name: string; floats: number }>;
}

/** Serialises `contents` into the bytes of a file. */
export function encodeStateFile(contents: StateFileContents): Uint8Array {
  const arrays: Array<[string, Float32Array]> = [["weights", contents.weights]];
  const { lora } = contents;
  if (lora) arrays.push(["lora_factors", lora.factors], ["lora_base", lora.base]);
  if (contents.optimizer) arrays.push(["adam_m", contents.optimizer.m], ["adam_v", contents.optimizer.v]);
  const header: Header = {
    kind: contents.kind,
    tokenizer: "byte",
    config: contents.config,
    parameterCount: contents.weights.length,
    step: contents.optimizer?.step ?? 0,
    ...(lora && { lora: { rank: lora.rank, alpha: lora.alpha } }),
    sections: arrays.map(([name, a]) => ({ name, floats: a.length })),
  };
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = new Uint8Array(Math.ceil(json.length / 4) * 4).fill(0x20);
  padded.set(json);
  json = padded;
  const payloadBytes = arrays.reduce((n, [, a]) => n + a.length * 4, 0);
  const bytes = new Uint8Array(PREAMBLE + json.length + payloadBytes);
  const view = new DataView(bytes.buffer);
  bytes.set(new TextEncoder().encode(MAGIC), 0);
  view.setUint32(8, VERSION, true);
  view.setUint32(12, json.length, true);
  bytes.set(json, PREAMBLE);
  let off = PREAMBLE + json.length;
  for (const [, a] of arrays) {
    for (let i = 0; i < a.length; i++, off += 4) view.setFloat32(off, a[i]!, true);
  }
  view.setUint32(16, crc32(bytes.subarray(PREAMBLE)), true);
  return bytes;
}

/**
 * The {@link "nexrl".EngineError | EngineError} for a state or sampler-weights file that cannot be loaded.
 * @param path the file.
 * @param problem the kind of problem.
 * @param detail what exactly was found and what to do.
 */
export function stateFileError(path: string, problem: StateFileProblem, detail: string): EngineError {
  return new EngineError(`cannot load ${path}: ${detail}`, { code: "state_file", path, stateFileProblem: problem });
}

/**
 * Parses and verifies the bytes of a file read from `path` (used in error messages).
 * @throws {@link "nexrl".EngineError | EngineError} for a foreign, truncated, corrupt or unsupported file.
 */
export function decodeStateFile(bytes: Uint8Array, path: string): StateFileContents {
  const fail = (problem: StateFileProblem, detail: string): never => {
    throw stateFileError(path, problem, detail);
  };
  const magic = new TextDecoder().decode(bytes.subarray(0, MAGIC.length));
  if (magic !== MAGIC.slice(0, magic.length)) {
    fail("not_a_state_file", `it does not start with "${MAGIC}", so it is not a nexrl engine state or snapshot file`);
  }
  if (bytes.length < PREAMBLE)
    fail(
      "truncated",
      `it has only ${bytes.length} bytes, fewer than the ${PREAMBLE}-byte preamble; the file was cut short, save it again`,
    );
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(8, true);
  if (version !== VERSION)
    fail(
      "unsupported_version",
      `it has format version ${version}, this nexrl reads version ${VERSION}; load it with the nexrl version that wrote it`,
    );
  const headerLength = view.getUint32(12, true);
  if (bytes.length < PREAMBLE + headerLength)
    fail(
      "truncated",
      `its header needs ${headerLength} bytes but the file ends after ${bytes.length - PREAMBLE}; the file was cut short, save it again`,
    );
  const header = parseHeader(bytes.subarray(PREAMBLE, PREAMBLE + headerLength));
  const expected = header ? PREAMBLE + headerLength + header.sections.reduce((n, s) => n + s.floats * 4, 0) : null;
  if (expected !== null && bytes.length < expected)
    fail(
      "truncated",
      `it has ${bytes.length} bytes but its header announces ${expected}; the file was cut short, save it again`,
    );
  if (crc32(bytes.subarray(PREAMBLE)) !== view.getUint32(16, true))
    fail("corrupt", "its checksum does not match its contents; the file is damaged, use another checkpoint");
  if (!header) return fail("corrupt", "its header is not valid JSON of the expected shape");
  if (bytes.length !== expected) fail("corrupt", `it has ${bytes.length} bytes but its header announces ${expected}`);
  let off = PREAMBLE + headerLength;
  const sections = new Map<string, Float32Array>();
  for (const { name, floats } of header.sections) {
    const a = new Float32Array(floats);
    for (let i = 0; i < floats; i++, off += 4) a[i] = view.getFloat32(off, true);
    sections.set(name, a);
  }
  const weights = sections.get("weights");
  const m = sections.get("adam_m");
  const v = sections.get("adam_v");
  if (!weights || weights.length !== header.parameterCount)
    return fail("corrupt", "it has no weights section of the announced size");
  let lora: StateFileLora | null = null;
  if (header.lora) {
    const factors = sections.get("lora_factors");
    const base = sections.get("lora_base");
    if (!factors || !base)
      return fail("corrupt", "its header names a LoRA model but it lacks lora_factors or lora_base");
    lora = { rank: header.lora.rank, alpha: header.lora.alpha, factors, base };
  }
  return {
    kind: header.kind,
    config: header.config,
    weights,
    optimizer: m && v ? { m, v, step: header.step } : null,
    lora,
  };
}

/** The header if it parses into the expected shape, else null. */
function parseHeader(bytes: Uint8Array): Header | null {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
  const h = value as Partial<Header> | null;
  const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  if (
    !h ||
    (h.kind !== "training_state" && h.kind !== "sampler_weights") ||
    typeof h.config !== "object" ||
    h.config === null ||
    !isCount(h.parameterCount) ||
    !isCount(h.step) ||
    (h.lora !== undefined && (!isCount(h.lora?.rank) || typeof h.lora.alpha !== "number")) ||
    !Array.isArray(h.sections) ||
    !h.sections.every((s) => typeof s?.name === "string" && isCount(s.floats))
  ) {
    return null;
  }
  return h as Header;
}
