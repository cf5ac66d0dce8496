/**
 * The few parts of the WebAssembly JavaScript API the engine uses, typed here because
 * TypeScript declares them only in its DOM library, which this package does not load (and must
 * not impose on its users' type checking).
 *
 * @module
 * @internal
 */

/** A compiled module. */
export interface WasmModule {
  readonly __wasmModule?: never;
}

/** A shared linear memory. */
export interface WasmMemory {
  /** Its bytes (a `SharedArrayBuffer`, since the memory is shared). */
  readonly buffer: SharedArrayBuffer;
}

interface WasmApi {
  Module: new (bytes: Uint8Array) => WasmModule;
  Instance: new (module: WasmModule, imports: Record<string, Record<string, unknown>>) => { exports: unknown };
  Memory: new (descriptor: { initial: number; maximum: number; shared: true }) => WasmMemory;
}

/** The runtime's `WebAssembly` object. */
export const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
