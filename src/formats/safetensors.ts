/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header naming
 * each tensor's dtype, shape and byte range, then the tensors' bytes.
 * @module
 * @internal
 */
import { InputError } from "../errors.js";

/** One F32 tensor to write, row-major. */
export interface NamedTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** The bytes of a safetensors file holding `tensors` (F32) with `metadata` as `__metadata__`. */
export function encodeSafetensors(tensors: readonly NamedTensor[], metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.data.length * 4;
    header[t.name] = { dtype: "F32", shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  // The data starts 8-byte aligned (padding with spaces, as the reference writer does).
  const headerLength = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLength + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerLength), true);
  out.fill(0x20, 8, 8 + headerLength);
  out.set(json, 8);
  let at = 8 + headerLength;
  for (const t of tensors) {
    for (let i = 0; i < t.data.length; i++, at += 4) view.setFloat32(at, t.data[i]!, true);
  }
  return out;
}

/** One tensor of a safetensors file as it is stored: dtype name, shape and little-endian bytes. */
export interface RawTensor {
  name: string;
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
}

/**
 * The tensors and metadata of a safetensors file (`what` names it in errors), in file order.
 * @throws InputError for a file whose header is not a safetensors header.
 */
export function decodeSafetensors(
  bytes: Uint8Array,
  what: string,
): { tensors: RawTensor[]; metadata: Record<string, string> } {
  const bad = (detail: string): never => {
    throw new InputError(`${what} is not a safetensors file: ${detail}`);
  };
  if (bytes.length < 8) bad("it is shorter than its 8-byte header length");
  const length = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (8 + length > bytes.length) bad(`its header length ${length} runs past the end`);
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + length))) as typeof header;
  } catch {
    return bad("its header is not JSON");
  }
  const data = bytes.subarray(8 + length);
  const metadata = (header["__metadata__"] ?? {}) as unknown as Record<string, string>;
  const tensors = Object.entries(header)
    .filter(([name]) => name !== "__metadata__")
    .sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0])
    .map(([name, t]) => {
      const [start, end] = t.data_offsets;
      if (!(end <= data.length && start <= end)) bad(`tensor ${name} lies outside the file`);
      return { name, dtype: t.dtype, shape: t.shape, bytes: data.slice(start, end) };
    });
  return { tensors, metadata };
}

/** The bytes of a safetensors file holding `tensors` as they are (any dtype), with `metadata`. */
export function encodeRawSafetensors(tensors: readonly RawTensor[], metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headerLength = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.fill(0x20, 8, 8 + headerLength);
  out.set(json, 8);
  let at = 8 + headerLength;
  for (const t of tensors) {
    out.set(t.bytes, at);
    at += t.bytes.length;
  }
  return out;
}
