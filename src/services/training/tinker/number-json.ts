/**
 * The JSON of long number arrays, written from where their values are defined — a window of
 * another array, or a function of the index — instead of from a copy: byte for byte what
 * `JSON.stringify` writes for the array of those values.
 *
 * Values go through `JSON.stringify` in blocks of {@link BLOCK}: short arrays in the young
 * generation that die at once. A copy of a whole array of 100k values would be allocated among
 * large objects, on fresh pages, and its page faults cost as much as its serialisation. Runs of
 * one number (the advantage of every trained position, zeros over a prompt) are written once and
 * repeated.
 *
 * Callers pass only finite numbers (checked against the loss contract first): their JSON is
 * ASCII, as {@link JsonWriter.elements} needs.
 *
 * @module
 */
import type { ArrayWindow, LazyValues } from "../../../types/datum-view.js";
import type { JsonWriter } from "./json-writer.js";

/** Values serialised per `JSON.stringify` call. */
const BLOCK = 1024;
/** Shortest run of one number written as a repeat rather than value by value. */
const MIN_RUN = 16;

/** Writes the elements (no brackets) of `window.array[window.start + from .. window.start + to - 1]`, after at least a `[`. */
export function writeWindow(out: JsonWriter, window: ArrayWindow, from: number, to: number): void {
  for (let i = window.start + from, end = window.start + to; i < end; i += BLOCK) {
    if (i > window.start + from) out.comma();
    out.elements(JSON.stringify(window.array.slice(i, Math.min(i + BLOCK, end))));
  }
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
  for (let i = 0; i < length; ) {
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

/** Writes the elements (no brackets) of unread `values`, from their source. */
export function writeLazy(out: JsonWriter, values: LazyValues): void {
  const { source } = values;
  if ("window" in source) writeWindow(out, source.window, 0, values.length);
  else writeComputed(out, values.length, source.at);
}
