/**
 * The one buffer that holds all of an engine's tensors, and the bump allocator that carves it.
 *
 * Every array of a model (weights, gradients, Adam moments, each thread's activations and
 * scratch) is a view into one `SharedArrayBuffer`, so worker threads see the same numbers
 * without copies. When the WebAssembly kernels are used that buffer is the memory of a shared
 * `WebAssembly.Memory`, which the kernels read and write in place. A layout is a fixed sequence
 * of allocations: replaying it on another thread over the same buffer yields the same views.
 *
 * @module
 * @internal
 */

import type { WasmMemory } from "./wasm/api.js";

/** Alignment of every allocation in bytes (a cache line; SIMD loads need only 16). */
const ALIGN = 64;

/** The storage of an engine: a shared WebAssembly memory, or a plain shared buffer. */
export type EngineStorage = { kind: "wasm"; memory: WasmMemory } | { kind: "plain"; buffer: SharedArrayBuffer };

/** The bytes of `storage`. */
export function storageBuffer(storage: EngineStorage): SharedArrayBuffer {
  return storage.kind === "wasm" ? storage.memory.buffer : storage.buffer;
}

/**
 * Hands out consecutive aligned views of a buffer. Without a buffer it only counts bytes
 * (sizing pass) and hands out empty arrays.
 */
export class Arena {
  private offset: number;

  /**
   * @param buffer the storage, or null to measure a layout.
   * @param start byte offset of the first allocation.
   */
  constructor(
    private readonly buffer: SharedArrayBuffer | null,
    start = 0,
  ) {
    this.offset = start;
  }

  /** Bytes used so far, counted from offset 0. */
  get size(): number {
    return this.offset;
  }

  /** `n` floats. */
  f32(n: number): Float32Array {
    const at = this.take(n * 4);
    return this.buffer ? new Float32Array(this.buffer, at, n) : new Float32Array(0);
  }

  /** `n` doubles. */
  f64(n: number): Float64Array {
    const at = this.take(n * 8);
    return this.buffer ? new Float64Array(this.buffer, at, n) : new Float64Array(0);
  }

  /** `n` 32-bit integers. */
  i32(n: number): Int32Array {
    const at = this.take(n * 4);
    return this.buffer ? new Int32Array(this.buffer, at, n) : new Int32Array(0);
  }

  private take(bytes: number): number {
    const at = this.offset;
    this.offset = Math.ceil((at + bytes) / ALIGN) * ALIGN;
    return at;
  }
}
