/**
 * Writing the safetensors format: an 8-byte little-endian header length, a JSON header naming
 * each tensor's dtype, shape and byte range, then the tensors' bytes.
 * @module
 * @internal
 */

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
