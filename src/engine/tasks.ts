/**
 * The pieces of work a thread does for an engine, run the same way on the calling thread (slot 0)
 * and on worker threads (the other slots): a forward or backward pass over a slice of a batch,
 * a range of the gradient reduction, or its share of a sampling request.
 *
 * @module
 * @internal
 */
import { storageBuffer, type EngineStorage } from "./arena.js";
import { layoutViews, type EngineViews, type LayoutSpec } from "./layout.js";
import { JS_KERNELS, kernelsModule, WasmKernels, type MatrixKernels } from "./matrix.js";
import { sampleLanes, type SampleJob } from "./sample-lanes.js";
import { ByteTokenizer } from "./tokenizer.js";
import type { SampledSequence } from "../wire/results.js";
import { backwardBatch, forwardBatch, type PackedBatch } from "./transformer.js";

/** Word of the shared control array that hands out the sequences of a sampling request. */
export const SAMPLE_COUNTER = 0;

/** One piece of work for one slot. */
export type ThreadTask =
  /** Forward pass over `batch`; leaves the activations and logprobs in the slot's workspace. */
  | { kind: "forward"; batch: PackedBatch }
  /** Backward pass after the forward pass of the same batch; adds into the slot's gradients. */
  | { kind: "backward"; batch: PackedBatch }
  /**
   * Adds the gradients of slots `sources`, in that order, to the engine's gradients over the
   * parameter range [from, to), and zeroes them there.
   */
  | { kind: "reduce"; from: number; to: number; sources: number[] }
  /** Decodes sequences of a sampling request until none is left. */
  | { kind: "sample"; job: SampleJob };

/** What a task returns: the sequences it sampled (with their index), or nothing. */
export type TaskResult = Array<SampledSequence & { index: number }> | null;

/** What an engine tells a worker about itself (sent with every task; cached by `id`). */
export interface ContextDescriptor {
  /** Unique in the process. */
  id: number;
  storage: EngineStorage;
  spec: LayoutSpec;
}

/** The views of an engine's storage and one slot's kernels, as a thread sees them. */
export interface ThreadContext {
  spec: LayoutSpec;
  views: EngineViews;
  /** Kernels of each slot this thread runs (built on first use). */
  kernelsFor(slot: number): MatrixKernels;
}

/** Views of an engine's storage for this thread; WebAssembly kernels when the storage is a WebAssembly memory. */
export function openContext(descriptor: ContextDescriptor): ThreadContext {
  const { storage, spec } = descriptor;
  const views = layoutViews(storageBuffer(storage), spec);
  const kernels = new Map<number, MatrixKernels>();
  return {
    spec,
    views,
    kernelsFor(slot) {
      let k = kernels.get(slot);
      if (!k) {
        const module = storage.kind === "wasm" ? kernelsModule() : null;
        if (storage.kind === "wasm" && !module) throw new Error("this thread cannot compile the WebAssembly kernels");
        k =
          storage.kind === "wasm"
            ? new WasmKernels(module!, storage.memory, views.slots[slot]!.kernelScratch)
            : JS_KERNELS;
        kernels.set(slot, k);
      }
      return k;
    },
  };
}

const tokenizer = new ByteTokenizer();

/** Runs `task` for slot `slot` of the engine seen through `ctx`. */
export function runTask(ctx: ThreadContext, slot: number, task: ThreadTask): TaskResult {
  const { spec, views } = ctx;
  const kernels = ctx.kernelsFor(slot);
  const own = views.slots[slot]!;
  switch (task.kind) {
    case "forward":
      forwardBatch(views.weights, spec.config, own.workspace!, task.batch, kernels);
      return null;
    case "backward":
      backwardBatch(views.weights, own.grads!, spec.config, own.workspace!, task.batch, kernels);
      return null;
    case "reduce": {
      const target = views.training!.grads.flat;
      const sources = task.sources.map((s) => views.slots[s]!.grads!.flat);
      for (let i = task.from; i < task.to; i++) {
        let sum = target[i]!;
        for (const g of sources) {
          sum += g[i]!;
          g[i] = 0;
        }
        target[i] = sum;
      }
      return null;
    }
    case "sample":
      return sampleLanes(
        task.job,
        {
          decoder: own.decoder,
          promptDecoder: views.slots[0]!.decoder,
          ownsPrompt: slot === 0,
          counter: views.control,
          counterIndex: SAMPLE_COUNTER,
        },
        kernels,
        tokenizer,
      );
  }
}
