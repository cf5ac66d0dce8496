/**
 * A minimal protobuf wire reader and writer written for the tests, independent of
 * `@bufbuild/protobuf` and of the code under test: varints, fixed 64-bit values and
 * length-delimited fields, by field number. Enough to read and write the Tinker messages field
 * by field as the SDK's `request_conv.py` / `response_conv.py` define them.
 */

/** One field as read: its number, wire type and raw value. */
export interface WireField {
  field: number;
  wireType: number;
  /** Varint value (wire type 0). */
  varint?: bigint;
  /** The 8 bytes of a fixed64 / double (wire type 1) or the bytes of a length-delimited field (2). */
  bytes?: Uint8Array;
}

/** Reads every field of a message, in order. */
export function readFields(buffer: Uint8Array): WireField[] {
  const fields: WireField[] = [];
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buffer[at++];
      if (byte === undefined) throw new Error("truncated varint");
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
  };
  while (at < buffer.length) {
    const key = Number(varint());
    const field = key >>> 3;
    const wireType = key & 7;
    if (wireType === 0) fields.push({ field, wireType, varint: varint() });
    else if (wireType === 1) {
      fields.push({ field, wireType, bytes: buffer.subarray(at, at + 8) });
      at += 8;
    } else if (wireType === 2) {
      const length = Number(varint());
      fields.push({ field, wireType, bytes: buffer.subarray(at, at + length) });
      at += length;
    } else if (wireType === 5) {
      fields.push({ field, wireType, bytes: buffer.subarray(at, at + 4) });
      at += 4;
    } else throw new Error(`unexpected wire type ${wireType}`);
  }
  return fields;
}

/** The fields numbered `n`. */
export const all = (fields: WireField[], n: number): WireField[] => fields.filter((f) => f.field === n);
/** The one field numbered `n` (undefined when absent). */
export const one = (fields: WireField[], n: number): WireField | undefined => all(fields, n).at(-1);
/** A length-delimited field as UTF-8 text. */
export const text = (f: WireField | undefined): string => new TextDecoder().decode(f?.bytes ?? new Uint8Array());
/** A double (fixed64). */
export const double = (f: WireField): number =>
  new DataView(f.bytes!.buffer, f.bytes!.byteOffset, 8).getFloat64(0, true);
/** Little-endian arrays in a bytes field. */
export function leArray(bytes: Uint8Array, kind: "i32" | "f32" | "i64" | "bf16"): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = { i32: 4, f32: 4, i64: 8, bf16: 2 }[kind];
  const out: number[] = [];
  for (let i = 0; i < bytes.byteLength; i += size) {
    if (kind === "i32") out.push(view.getInt32(i, true));
    else if (kind === "f32") out.push(view.getFloat32(i, true));
    else if (kind === "i64") out.push(Number(view.getBigInt64(i, true)));
    else {
      const f = new DataView(new ArrayBuffer(4));
      f.setUint16(2, view.getUint16(i, true));
      out.push(f.getFloat32(0));
    }
  }
  return out;
}
/** A packed repeated varint field (e.g. `repeated int64 shape`). */
export function packedVarints(f: WireField | undefined): number[] {
  return f ? readPackedVarints(f.bytes!) : [];
}
function readPackedVarints(bytes: Uint8Array): number[] {
  const out: number[] = [];
  let value = 0n;
  let shift = 0n;
  for (const byte of bytes) {
    value |= BigInt(byte & 0x7f) << shift;
    shift += 7n;
    if ((byte & 0x80) === 0) {
      out.push(Number(BigInt.asIntN(64, value)));
      value = 0n;
      shift = 0n;
    }
  }
  return out;
}
/** A map field's entries (`map<string, V>`: key field 1, value field 2). */
export function mapEntries(fields: WireField[], n: number): Array<[string, WireField]> {
  return all(fields, n).map((entry) => {
    const parts = readFields(entry.bytes!);
    return [text(one(parts, 1)), one(parts, 2)!];
  });
}

/** Writes a message field by field. */
export class Writer {
  private readonly parts: number[] = [];

  private varintBytes(value: bigint): void {
    let v = BigInt.asUintN(64, value);
    do {
      const byte = Number(v & 0x7fn);
      v >>= 7n;
      this.parts.push(v > 0n ? byte | 0x80 : byte);
    } while (v > 0n);
  }

  /** A varint field (int32, int64, bool, enum). */
  varint(field: number, value: number | bigint | boolean): this {
    this.varintBytes(BigInt((field << 3) | 0));
    this.varintBytes(typeof value === "boolean" ? (value ? 1n : 0n) : BigInt(value));
    return this;
  }

  /** A double field. */
  double(field: number, value: number): this {
    this.varintBytes(BigInt((field << 3) | 1));
    const b = new DataView(new ArrayBuffer(8));
    b.setFloat64(0, value, true);
    this.parts.push(...new Uint8Array(b.buffer));
    return this;
  }

  /** A length-delimited field: bytes, a string, or a nested message. */
  bytes(field: number, value: Uint8Array | string | Writer): this {
    const data =
      typeof value === "string" ? new TextEncoder().encode(value) : value instanceof Writer ? value.finish() : value;
    this.varintBytes(BigInt((field << 3) | 2));
    this.varintBytes(BigInt(data.length));
    this.parts.push(...data);
    return this;
  }

  /** A packed repeated varint field. */
  packed(field: number, values: number[]): this {
    const inner = new Writer();
    for (const v of values) inner.varintBytes(BigInt(v));
    return this.bytes(field, inner.finish());
  }

  /** The bytes written. */
  finish(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

/** Little-endian bytes of `values`. */
export function le(values: number[], kind: "i32" | "f32" | "i64" | "bf16"): Uint8Array {
  const size = { i32: 4, f32: 4, i64: 8, bf16: 2 }[kind];
  const view = new DataView(new ArrayBuffer(values.length * size));
  values.forEach((v, i) => {
    if (kind === "i32") view.setInt32(i * size, v, true);
    else if (kind === "f32") view.setFloat32(i * size, v, true);
    else if (kind === "i64") view.setBigInt64(i * size, BigInt(v), true);
    else {
      const f = new DataView(new ArrayBuffer(4));
      f.setFloat32(0, v);
      view.setUint16(i * size, f.getUint16(0), true); // truncation: exact for values that are bf16 already
    }
  });
  return new Uint8Array(view.buffer);
}

/** `v` rounded to bfloat16 (nearest, ties to even), as a float. */
export function toBf16(v: number): number {
  const f = new DataView(new ArrayBuffer(4));
  f.setFloat32(0, v);
  const bits = f.getUint32(0);
  const rounded = ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) << 16;
  f.setUint32(0, rounded >>> 0);
  return f.getFloat32(0);
}
