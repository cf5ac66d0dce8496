/**
 * A full garbage collection on demand. V8 does not count an engine's WebAssembly memory toward
 * its heap, so after a server closes engines it may not collect them for a long time (never, if it
 * then allocates little): the memory of unloaded models would stay resident. `nexrl serve` runs
 * one collection after unloading, which returns that memory at once (tens of milliseconds).
 *
 * @module
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let gc: (() => void) | undefined;

/**
 * V8's `gc`: the global one when Node runs with `--expose-gc`, else one taken from a new context
 * made while the flag is briefly on (so no other context gets a `gc` global).
 */
function collector(): () => void {
  const global = (globalThis as { gc?: () => void }).gc;
  if (typeof global === "function") return global;
  setFlagsFromString("--expose-gc");
  try {
    return runInNewContext("gc") as () => void;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

/** Runs a full garbage collection. */
export function collectGarbage(): void {
  gc ??= collector();
  gc();
}
