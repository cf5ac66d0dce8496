/**
 * {@link JsonWriter}: JSON text written piece by piece into one reused byte buffer, and copied out
 * once as the bytes of a request body.
 *
 * Large bodies are why it exists. Built as a string of many pieces, a body of a few megabytes
 * lives in the young generation while it is built and held for resubmission, and every scavenge
 * copies it again; written here, the pieces die as soon as they are written, and the body is one
 * off-heap allocation that the transport sends as it is.
 *
 * @module
 */

/** Size of a fresh buffer. */
const INITIAL_BYTES = 64 * 1024;
/** A buffer grown beyond this is let go after use rather than kept for the next body. */
const MAX_KEPT_BYTES = 16 * 1024 * 1024;
/** The byte of `,`. */
const COMMA = 0x2c;

/** Appends JSON text to a reused buffer; {@link JsonWriter.bytes} copies out what was written. */
export class JsonWriter {
  private buffer = Buffer.allocUnsafe(INITIAL_BYTES);
  private length = 0;

  /** Bytes written since the last {@link JsonWriter.bytes}. */
  get position(): number {
    return this.length;
  }

  /** Appends `text`, which must be ASCII (JSON syntax, the JSON of numbers). */
  ascii(text: string): void {
    this.reserve(text.length);
    this.length += this.buffer.write(text, this.length, "latin1");
  }

  /** Appends `value` as `JSON.stringify` writes it, in UTF-8. */
  json(value: unknown): void {
    const text = JSON.stringify(value);
    this.reserve(text.length * 3);
    this.length += this.buffer.write(text, this.length, "utf8");
  }

  /**
   * Appends the elements of `array`, the ASCII JSON text of a non-empty array, without its
   * brackets (after at least the array's own `[`). Writes `array` one byte early and puts back the byte its `[` overwrote, which
   * spares a copy of the text without the brackets.
   */
  elements(array: string): void {
    const at = this.length - 1;
    const before = this.buffer[at]!;
    this.reserve(array.length - 1);
    this.buffer.write(array, at, "latin1");
    this.buffer[at] = before;
    this.length = at + array.length - 1;
  }

  /** Appends `count` (≥ 1) copies of the ASCII `text`, separated by commas. */
  repeat(text: string, count: number): void {
    this.ascii(text);
    const bytes = (text.length + 1) * (count - 1);
    if (bytes === 0) return;
    this.reserve(bytes);
    this.buffer.fill(`,${text}`, this.length, this.length + bytes, "latin1");
    this.length += bytes;
  }

  /** Appends again the bytes written from `start` to `end` (positions since the last {@link JsonWriter.bytes}). */
  again(start: number, end: number): void {
    this.reserve(end - start);
    this.buffer.copy(this.buffer, this.length, start, end);
    this.length += end - start;
  }

  /** Appends a comma. */
  comma(): void {
    this.reserve(1);
    this.buffer[this.length++] = COMMA;
  }

  /** A copy of the bytes written, which the writer no longer touches; the writer starts empty again. */
  bytes(): Uint8Array {
    const out = Buffer.allocUnsafe(this.length);
    this.buffer.copy(out, 0, 0, this.length);
    this.length = 0;
    if (this.buffer.length > MAX_KEPT_BYTES) this.buffer = Buffer.allocUnsafe(INITIAL_BYTES);
    return out;
  }

  /** Drops what was written since the last {@link JsonWriter.bytes} (left by a body that failed half way). */
  clear(): void {
    this.length = 0;
  }

  private reserve(bytes: number): void {
    const needed = this.length + bytes;
    if (needed <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}
