/**
 * The little-endian number arrays inside the byte fields of the Tinker protobuf messages
 * (`tinker_public.proto`): token ids as int32, logprobs as float32, tensors in their `DType`
 * (float32, int64, int32 or bfloat16), and int64 byte offsets.
 *
 * @module
 */
import { DType } from "./tinker_public_pb.js";
import { InputError } from "../../errors.js";

// Typed arrays use the host's byte order; the wire is little-endian, like every host Node supports.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1)
  throw new InputError("the Tinker protobuf codec needs a little-endian host");

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = {
  [DType.DTYPE_UNSPECIFIED]: 0,
  [DType.DTYPE_FLOAT32]: 4,
  [DType.DTYPE_INT64]: 8,
  [DType.DTYPE_INT32]: 4,
  [DType.DTYPE_BFLOAT16]: 2,
};

const bytesOf = (view: ArrayBufferView): Uint8Array => new Uint8Array(view.buffer, view.byteOffset, view.byteLength);

/** `values` as little-endian int32 (they must be integers in range; callers check). */
export function int32Bytes(values: ArrayLike<number>): Uint8Array {
  return bytesOf(Int32Array.from(values));
}

/** `values` as little-endian float32. */
export function float32Bytes(values: ArrayLike<number>): Uint8Array {
  return bytesOf(Float32Array.from(values));
}

/** `values` (safe integers) as little-endian int64. */
export function int64Bytes(values: ArrayLike<number>): Uint8Array {
  const out = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = BigInt(values[i]!);
  return bytesOf(out);
}

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** `values` as bfloat16 (the upper half of their float32, rounded to nearest even; NaN stays NaN). */
export function bfloat16Bytes(values: ArrayLike<number>): Uint8Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    F32[0] = values[i]!;
    const bits = U32[0]!;
    out[i] = Number.isNaN(F32[0]) ? (bits >>> 16) | 0x40 : (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return bytesOf(out);
}

/** `bytes` as an aligned view of `Type`, copying only when the bytes are not aligned. */
function view<T>(
  bytes: Uint8Array,
  size: number,
  Type: new (buffer: ArrayBufferLike, offset: number, length: number) => T,
  what: string,
): T {
  if (bytes.byteLength % size !== 0)
    throw new InputError(`${what}: ${bytes.byteLength} bytes is not a whole number of ${size}-byte values`);
  // A copy (not `slice`, which on a Buffer is a view) starts at offset 0 of a buffer of its own.
  const aligned = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
  return new Type(aligned.buffer, aligned.byteOffset, aligned.byteLength / size);
}

/** Little-endian int32 values. */
export function readInt32(bytes: Uint8Array, what = "int32 array"): number[] {
  return Array.from(view(bytes, 4, Int32Array, what));
}

/** Little-endian float32 values. */
export function readFloat32(bytes: Uint8Array, what = "float32 array"): number[] {
  return Array.from(view(bytes, 4, Float32Array, what));
}

/** Little-endian int64 values. @throws {@link "nexrl/errors".InputError | InputError} for a value beyond ±2^53. */
export function readInt64(bytes: Uint8Array, what = "int64 array"): number[] {
  const values = view(bytes, 8, BigInt64Array, what);
  const out = new Array<number>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
      throw new InputError(`${what}[${i}] is ${v}, beyond the integers a JavaScript number holds exactly`);
    out[i] = Number(v);
  }
  return out;
}

/** bfloat16 values (each the upper half of a float32), widened to numbers exactly. */
export function readBfloat16(bytes: Uint8Array, what = "bfloat16 array"): number[] {
  const halves = view(bytes, 2, Uint16Array, what);
  const out = new Array<number>(halves.length);
  for (let i = 0; i < halves.length; i++) {
    U32[0] = halves[i]! << 16;
    out[i] = F32[0]!;
  }
  return out;
}

/** The values of `bytes` in `dtype`. @throws {@link "nexrl/errors".InputError | InputError} for `DTYPE_UNSPECIFIED` or an unknown dtype. */
export function readDtype(bytes: Uint8Array, dtype: DType, what: string): number[] {
  switch (dtype) {
    case DType.DTYPE_FLOAT32:
      return readFloat32(bytes, what);
    case DType.DTYPE_INT64:
      return readInt64(bytes, what);
    case DType.DTYPE_INT32:
      return readInt32(bytes, what);
    case DType.DTYPE_BFLOAT16:
      return readBfloat16(bytes, what);
    default:
      throw new InputError(`${what}: unsupported dtype ${String(dtype)}; expected float32, int64, int32 or bfloat16`);
  }
}
