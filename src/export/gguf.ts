/**
 * Writing the GGUF format (version 3), llama.cpp's model file: the magic `GGUF`, the version, the
 * tensor and key-value counts, the key-value pairs (typed metadata), each tensor's name,
 * dimensions, type and offset, then the tensors' bytes, each starting at a multiple of 32 bytes
 * from the data section, which itself starts 32-byte aligned. Little-endian; strings are a u64
 * byte length and UTF-8 without a terminator.
 * @module
 * @internal
 */

/** One metadata value, with the GGUF type it is written as. */
export type GgufValue =
  | { type: "string"; value: string }
  | { type: "uint32"; value: number }
  | { type: "float32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string[]"; value: readonly string[] }
  | { type: "int32[]"; value: readonly number[] };

/** One F32 tensor to write: `dims` in GGUF's order, the fastest-varying (ggml's `ne0`) first. */
export interface GgufTensor {
  name: string;
  dims: number[];
  data: Float32Array;
}

/** GGUF's alignment of the data section and of each tensor in it (`general.alignment`'s default). */
export const GGUF_ALIGNMENT = 32;

/** `gguf_type` codes. */
const TYPE = { uint32: 4, int32: 5, float32: 6, bool: 7, string: 8, array: 9 } as const;

/** ggml's `GGML_TYPE_F32`. */
const GGML_TYPE_F32 = 0;

/** Appends little-endian values to a growing byte buffer. */
class ByteWriter {
  private bytes = new Uint8Array(1 << 16);
  private view = new DataView(this.bytes.buffer);
  length = 0;

  private reserve(n: number): number {
    if (this.length + n > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + n));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.length;
    this.length += n;
    return at;
  }

  // Each writer reserves first: reserving may replace `bytes` and `view`.
  u32(v: number): void {
    const at = this.reserve(4);
    this.view.setUint32(at, v, true);
  }

  i32(v: number): void {
    const at = this.reserve(4);
    this.view.setInt32(at, v, true);
  }

  u64(v: number): void {
    const at = this.reserve(8);
    this.view.setBigUint64(at, BigInt(v), true);
  }

  f32(v: number): void {
    const at = this.reserve(4);
    this.view.setFloat32(at, v, true);
  }

  u8(v: number): void {
    const at = this.reserve(1);
    this.view.setUint8(at, v);
  }

  string(s: string): void {
    const utf8 = new TextEncoder().encode(s);
    this.u64(utf8.length);
    const at = this.reserve(utf8.length);
    this.bytes.set(utf8, at);
  }

  /** Zero bytes up to the next multiple of `alignment`. */
  pad(alignment: number): void {
    this.reserve((alignment - (this.length % alignment)) % alignment);
  }

  result(): Uint8Array {
    return this.bytes.subarray(0, this.length);
  }
}

function writeValue(w: ByteWriter, v: GgufValue): void {
  switch (v.type) {
    case "string":
      w.u32(TYPE.string);
      w.string(v.value);
      return;
    case "uint32":
      w.u32(TYPE.uint32);
      w.u32(v.value);
      return;
    case "float32":
      w.u32(TYPE.float32);
      w.f32(v.value);
      return;
    case "bool":
      w.u32(TYPE.bool);
      w.u8(v.value ? 1 : 0);
      return;
    case "string[]":
      w.u32(TYPE.array);
      w.u32(TYPE.string);
      w.u64(v.value.length);
      for (const s of v.value) w.string(s);
      return;
    case "int32[]":
      w.u32(TYPE.array);
      w.u32(TYPE.int32);
      w.u64(v.value.length);
      for (const n of v.value) w.i32(n);
  }
}

/** The bytes of a GGUF v3 file holding `metadata` (in order) and `tensors` (F32, in order). */
export function encodeGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensor[],
): Uint8Array {
  const w = new ByteWriter();
  w.u32(0x46554747); // "GGUF" read as a little-endian u32
  w.u32(3);
  w.u64(tensors.length);
  w.u64(metadata.length);
  for (const [key, value] of metadata) {
    w.string(key);
    writeValue(w, value);
  }
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const n of t.dims) w.u64(n);
    w.u32(GGML_TYPE_F32);
    w.u64(offset);
    offset += Math.ceil((t.data.length * 4) / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  }
  w.pad(GGUF_ALIGNMENT);
  for (const t of tensors) {
    for (const v of t.data) w.f32(v);
    w.pad(GGUF_ALIGNMENT);
  }
  return w.result();
}
