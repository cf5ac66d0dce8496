/**
 * The JSON of long number arrays, written from where their values are defined — a window of
 * another array, or a function of the index — instead of from a copy: byte for byte what
 * `JSON.stringify` writes for the array of those values.
 *
 * Values go through `JSON.stringify` in blocks of `BLOCK`: short arrays in the young
 * generation that die at once. A copy of a whole array of 100k values would be allocated among
 * large objects, on fresh pages, and its page faults cost as much as its serialisation. Runs of
 * one number (the advantage of every trained position, zeros over a prompt) are written once and
 * repeated.
 *
 * Callers pass only finite numbers (checked against the loss contract first): their JSON is
 * ASCII, as `JsonWriter.elements` needs.
 *
 * @module
 */
import type { ArrayWindow, ValueSource } from "../../../types/datum-view.js";
import type { JsonWriter } from "./json-writer.js";

/** Values serialised per `JSON.stringify` call. */
const BLOCK = 1024;
/** Shortest run of one number written as a repeat rather than value by value. */
const MIN_RUN = 16;

/** Writes `array[start .. end - 1]` in blocks, after `written` elements; returns whether any element is written now. */
function writeStretch(
  out: JsonWriter,
  array: readonly number[],
  start: number,
  end: number,
  written: boolean,
): boolean {
  for (let i = start; i < end; i += BLOCK) {
    if (written) out.comma();
    out.elements(JSON.stringify(array.slice(i, Math.min(i + BLOCK, end))));
    written = true;
  }
  return written;
}

/** Writes the elements (no brackets) of `window.array[window.start + from .. window.start + to - 1]`, after at least a `[`. */
export function writeWindow(out: JsonWriter, window: ArrayWindow, from: number, to: number): void {
  const { array } = window;
  const end = window.start + to;
  let written = false;
  let stretch = window.start + from;
  for (let i = stretch; i < end;) {
    const value = array[i];
    let k = i + 1;
    while (k < end && array[k] === value) k++;
    if (k - i >= MIN_RUN) {
      written = writeStretch(out, array, stretch, i, written);
      if (written) out.comma();
      out.repeat(JSON.stringify(value), k - i);
      written = true;
      stretch = k;
    }
    i = k;
  }
  writeStretch(out, array, stretch, end, written);
}

/** Writes the elements (no brackets) of `at(0) .. at(length - 1)`, after at least a `[`. */
export function writeComputed(out: JsonWriter, length: number, at: (index: number) => number): void {
  let pending: number[] = [];
  let written = false;
  const flush = (): void => {
    if (pending.length === 0) return;
    if (written) out.comma();
    out.elements(JSON.stringify(pending));
    pending = [];
    written = true;
  };
  for (let i = 0; i < length;) {
    const value = at(i);
    let end = i + 1;
    while (end < length && at(end) === value) end++;
    if (end - i >= MIN_RUN) {
      flush();
      if (written) out.comma();
      // -0 and 0 (equal here) are both written 0.
      out.repeat(JSON.stringify(value), end - i);
      written = true;
    } else {
      for (let k = i; k < end; k++) pending.push(value);
      if (pending.length >= BLOCK) flush();
    }
    i = end;
  }
  flush();
}

/** Values to write: how many, and where they come from (a `LazyValues` is one). */
export interface SourcedValues {
  /** Number of values. */
  readonly length: number;
  /** Where value `i` comes from. */
  readonly source: ValueSource;
}

/** Writes the elements (no brackets) of `values`, from their source. */
export function writeValues(out: JsonWriter, values: SourcedValues): void {
  const { source } = values;
  if ("window" in source) writeWindow(out, source.window, 0, values.length);
  else writeComputed(out, values.length, source.at);
}
