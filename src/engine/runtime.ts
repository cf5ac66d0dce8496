/**
 * The storage, views and threads of one engine or sampler: allocates the storage its layout
 * needs (a shared WebAssembly memory for the WebAssembly kernels, else a plain shared buffer),
 * and runs tasks on its thread slots, slot 0 on the calling thread and the others on the
 * process's worker pool.
 *
 * @module
 * @internal
 */
import { availableParallelism } from "node:os";
import type { EngineStorage } from "./arena.js";
import type { ResolvedModelConfig } from "./config.js";
import { layoutBytes, layoutSpec, type EngineViews, type LayoutSpec } from "./layout.js";
import { kernelsModule, type KernelKind, type MatrixKernels } from "./matrix.js";
import {
  openContext,
  runTask,
  type ContextDescriptor,
  type TaskResult,
  type ThreadContext,
  type ThreadTask,
} from "./tasks.js";
import { threadPool } from "./thread-pool.js";
import { wasmApi } from "./wasm/api.js";
import { ConfigError, EngineError } from "../errors.js";

/** Most threads an engine may use (the recipe schema's `service.local_service.threads` has the same bound). */
const MAX_THREADS = 256;
const WASM_PAGE = 65536;
/** Pages of a 32-bit WebAssembly memory. */
const MAX_WASM_PAGES = 65536;

/** How an engine computes. */
export interface ComputeOptions {
  /**
   * Threads for training steps and sampling (the calling thread counts as one); default: the
   * machine's available parallelism. Results are deterministic for a given count.
   */
  threads?: number;
  /**
   * `wasm`: WebAssembly SIMD kernels (the default where the runtime supports them); `js`: the
   * TypeScript kernels.
   */
  kernels?: KernelKind;
}

let nextId = 1;

/** Releases the threads of runtimes dropped without {@link EngineRuntime.close} (snapshot samplers). */
const dropped = new FinalizationRegistry<number>((id) => void threadPool.release(id));

/**
 * Validated thread count of `options`.
 * @throws {@link "nexrl".ConfigError | ConfigError} for an invalid count.
 */
export function threadCount(options: ComputeOptions): number {
  const threads = options.threads ?? availableParallelism();
  if (!Number.isSafeInteger(threads) || threads < 1 || threads > MAX_THREADS) {
    throw new ConfigError(`threads must be an integer from 1 to ${MAX_THREADS}, got ${String(threads)}`);
  }
  return threads;
}

function allocate(bytes: number, kernels: KernelKind | undefined): EngineStorage {
  if (kernels !== undefined && kernels !== "wasm" && kernels !== "js") {
    throw new ConfigError(`kernels must be "wasm" or "js", got ${JSON.stringify(kernels)}`);
  }
  const pages = Math.ceil(bytes / WASM_PAGE);
  if (kernels !== "js") {
    const reason = !kernelsModule()
      ? "this JavaScript runtime cannot compile WebAssembly SIMD"
      : pages > MAX_WASM_PAGES
        ? `the model needs ${Math.ceil(bytes / 2 ** 20)} MiB, more than a WebAssembly memory holds (4 GiB); use fewer threads or a smaller model`
        : null;
    if (!reason) {
      try {
        return { kind: "wasm", memory: new wasmApi.Memory({ initial: pages, maximum: pages, shared: true }) };
      } catch (err) {
        if (kernels === "wasm") throw new ConfigError(`cannot allocate the WebAssembly memory: ${String(err)}`);
      }
    } else if (kernels === "wasm") {
      throw new ConfigError(`kernels "wasm" are not available: ${reason}; use kernels "js"`);
    }
  }
  return { kind: "plain", buffer: new SharedArrayBuffer(pages * WASM_PAGE) };
}

/**
 * Bytes of the storage an engine of `config` (training passes of `chunkRows` rows; 0 for a
 * sampler) allocates with `options`' threads: whole WebAssembly pages, as {@link EngineRuntime} allocates.
 * @throws {@link "nexrl".ConfigError | ConfigError} for an invalid thread count.
 */
export function storageBytes(config: ResolvedModelConfig, options: ComputeOptions, chunkRows: number): number {
  return Math.ceil(layoutBytes(layoutSpec(config, threadCount(options), chunkRows)) / WASM_PAGE) * WASM_PAGE;
}

/** One engine's (or sampler's) storage and threads. */
export class EngineRuntime {
  /** The layout of the storage. */
  readonly spec: LayoutSpec;
  /** Every array, as the calling thread sees them. */
  readonly views: EngineViews;
  /** Kernels of the calling thread (slot 0). */
  readonly kernels: MatrixKernels;
  private readonly context: ContextDescriptor;
  private readonly local: ThreadContext;
  private open = true;

  /**
   * @param chunkRows rows of one training pass (0 for a sampler, which has no training state).
   * @throws {@link "nexrl".ConfigError | ConfigError} for invalid options.
   */
  constructor(config: ResolvedModelConfig, options: ComputeOptions, chunkRows: number) {
    this.spec = layoutSpec(config, threadCount(options), chunkRows);
    const storage = allocate(layoutBytes(this.spec), options.kernels);
    this.context = { id: nextId++, storage, spec: this.spec };
    this.local = openContext(this.context);
    this.views = this.local.views;
    this.kernels = this.local.kernelsFor(0);
    if (this.spec.threads > 1) {
      threadPool.acquire();
      dropped.register(this, this.context.id, this);
    }
  }

  /** Number of thread slots. */
  get threads(): number {
    return this.spec.threads;
  }

  /**
   * Runs `tasks[t]` on slot t (slot 0 on this thread, the others on worker threads; null: no
   * task) and waits for all of them.
   * @returns each slot's result.
   */
  run(tasks: Array<ThreadTask | null>): TaskResult[] {
    if (!this.open)
      throw new EngineError("this engine (or sampler) was closed; create a new one to compute again", {
        code: "closed",
      });
    const remote = tasks.slice(1).map((task, i) => (task ? { slot: i + 1, task } : null));
    const first = tasks[0];
    if (remote.every((t) => t === null)) return [first ? runTask(this.local, 0, first) : null];
    const out = threadPool.run(this.context, remote, () => (first ? runTask(this.local, 0, first) : null));
    return [out.local, ...out.remote];
  }

  /** Releases the worker threads (terminated when no other engine uses them). Idempotent. */
  async close(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    if (this.spec.threads > 1) {
      dropped.unregister(this);
      await threadPool.release(this.context.id);
    }
  }
}
