/**
 * Where each of an engine's arrays lives in its storage: the shared part (weights, and for a
 * training engine the gradients and Adam moments) and one slot per thread (its gradient buffer,
 * training workspace, decoder and kernel scratch). The layout is a pure function of a
 * {@link LayoutSpec}, so a worker thread handed the storage and the spec finds every array.
 *
 * The slots are sized for the largest work a thread can be given; memory that a run never
 * touches is reserved address space only, not resident memory.
 *
 * @module
 * @internal
 */
import { Arena } from "./arena.js";
import type { ResolvedModelConfig } from "./config.js";
import { LaneDecoder } from "./decoder.js";
import { parameterCount, tensorViews, type ModelTensors } from "./params.js";
import { Workspace } from "./workspace.js";

/**
 * Cache memory the decoder lanes of all threads may take together (the lane count per thread
 * shrinks for large models and many threads, down to one).
 */
const LANE_CACHE_BYTES = 256 * 2 ** 20;
/** Most sequences one thread decodes side by side. */
const MAX_LANES = 8;

/** What a layout holds. */
export interface LayoutSpec {
  config: ResolvedModelConfig;
  /** Number of thread slots. */
  threads: number;
  /** Rows of each slot's training workspace; 0 for a sampler without training state. */
  trainRows: number;
  /** Decoder lanes per slot. */
  lanes: number;
}

/** Builds the spec of an engine (with `trainRows` rows per pass) or a sampler (`trainRows` 0). */
export function layoutSpec(config: ResolvedModelConfig, threads: number, chunkRows: number): LayoutSpec {
  const { nLayers, contextLength: C, dModel: d } = config;
  const laneBytes = nLayers * C * 2 * d * 4;
  const lanes = Math.max(1, Math.min(MAX_LANES, Math.floor(LANE_CACHE_BYTES / (threads * laneBytes))));
  // Sequences are split between threads at sequence boundaries near equal row counts, so a
  // thread's share exceeds an equal share by less than one sequence.
  const trainRows = chunkRows === 0 ? 0 : Math.min(chunkRows, Math.ceil(chunkRows / threads) + C);
  return { config, threads, trainRows, lanes };
}

/** The arrays of one thread slot. */
export interface ThreadSlot {
  /** Where this thread's backward pass adds gradients (slot 0: the engine's own; null without training). */
  grads: ModelTensors | null;
  /** Training activations (null without training). */
  workspace: Workspace | null;
  /** Decoder lanes. */
  decoder: LaneDecoder;
  /** Scratch of the WebAssembly `matmulNT` (its largest transposed operand) and `logSumExpRows`. */
  kernelScratch: Float32Array;
}

/** The shared arrays plus every thread slot. */
export interface EngineViews {
  weights: ModelTensors;
  /** Accumulated gradients, Adam moments (null for a sampler). */
  training: { grads: ModelTensors; adamM: Float32Array; adamV: Float32Array } | null;
  /** Counters of parallel jobs (Atomics). */
  control: Int32Array;
  slots: ThreadSlot[];
}

/** Words of {@link EngineViews.control} (one is used: the sampling counter of `tasks.ts`). */
const CONTROL_WORDS = 16;

function sharedPart(arena: Arena, spec: LayoutSpec): Omit<EngineViews, "slots"> {
  const P = parameterCount(spec.config);
  const weights = tensorViews(arena.f32(P), spec.config);
  const training =
    spec.trainRows > 0
      ? { grads: tensorViews(arena.f32(P), spec.config), adamM: arena.f32(P), adamV: arena.f32(P) }
      : null;
  return { weights, training, control: arena.i32(CONTROL_WORDS) };
}

function slot(arena: Arena, spec: LayoutSpec, weights: ModelTensors, ownGrads: ModelTensors | null): ThreadSlot {
  const { config, trainRows } = spec;
  const { dModel: d, vocabSize: V, contextLength: C } = config;
  // Allocated in every slot so that all slots have one size; slot 0 leaves it untouched.
  const privateGrads = trainRows > 0 ? tensorViews(arena.f32(parameterCount(config)), config) : null;
  const workspace = trainRows > 0 ? new Workspace(config, trainRows, arena) : null;
  const decoder = new LaneDecoder(weights, config, spec.lanes, arena);
  // matmulNT transposes B (a weight matrix: V × d or 4d × d at most, or C × dh in attention);
  // logSumExpRows keeps two numbers per row.
  const kernelScratch = arena.f32(trainRows > 0 ? Math.max(V * d, 4 * d * d, C * d, 2 * trainRows) : 0);
  return { grads: ownGrads ?? privateGrads, workspace, decoder, kernelScratch };
}

/** Byte sizes of the shared part and of one slot. */
function sizes(spec: LayoutSpec): { shared: number; slot: number } {
  const sizing = new Arena(null);
  const { weights } = sharedPart(sizing, spec);
  const shared = sizing.size;
  slot(sizing, spec, weights, null);
  return { shared, slot: sizing.size - shared };
}

/** Bytes of storage a layout needs. */
export function layoutBytes(spec: LayoutSpec): number {
  const s = sizes(spec);
  return s.shared + spec.threads * s.slot;
}

/** The shared arrays and every slot's arrays, over `buffer`. */
export function layoutViews(buffer: SharedArrayBuffer, spec: LayoutSpec): EngineViews {
  const s = sizes(spec);
  const shared = sharedPart(new Arena(buffer), spec);
  const slots: ThreadSlot[] = [];
  for (let t = 0; t < spec.threads; t++) {
    const own = t === 0 ? (shared.training?.grads ?? null) : null;
    slots.push(slot(new Arena(buffer, s.shared + t * s.slot), spec, shared.weights, own));
  }
  return { ...shared, slots };
}
