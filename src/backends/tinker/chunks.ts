/**
 * Large `forward` / `forward_backward` calls go out in chunks (at most `fwdbwd_max_chunk_len`
 * datums and `fwdbwd_max_chunk_bytes_count` bytes by the SDK's size estimate each, consecutive
 * `seq_id`s); their results are concatenated and their metrics reduced by the `name:reduction`
 * suffix of each key (wire-protocols §2.6), weighting by the datums of each chunk.
 *
 * @module
 */
import type { Datum } from "../../wire/wire.js";
import type { ForwardBackwardOutput } from "../../contracts/training.js";
import { maxOf, minOf } from "../../wire/arrays.js";

/** Chunk limits (Tinker's `client/config` flags). */
export interface ChunkLimits {
  /** Most datums per chunk (`fwdbwd_max_chunk_len`, default 1024). */
  maxDatums: number;
  /** Most JSON bytes per chunk (`fwdbwd_max_chunk_bytes_count`, default 5 000 000). */
  maxBytes: number;
}

/** Tinker's default chunk limits. */
export const DEFAULT_CHUNK_LIMITS: Readonly<ChunkLimits> = Object.freeze({ maxDatums: 1024, maxBytes: 5_000_000 });

/**
 * The Tinker SDK's size estimate of a datum: 10 bytes per token and per loss-input value, an
 * image's data or location length. Serialising each datum to measure it would cost as much as
 * sending it.
 */
export function estimateDatumBytes(datum: Datum): number {
  let bytes = 0;
  for (const chunk of datum.model_input.chunks) {
    bytes +=
      chunk.type === "encoded_text"
        ? chunk.tokens.length * 10
        : chunk.type === "image"
          ? chunk.data.length
          : chunk.location.length;
  }
  for (const tensor of Object.values(datum.loss_fn_inputs)) bytes += tensor.data.length * 10;
  return bytes;
}

/**
 * The protobuf-generation SDK's size estimate of a datum (0.25): 4 bytes per token (int32), an
 * image's data or location length, and each loss input's bytes in its dtype (4 for float32, 8
 * for int64) plus 8 per sparse index.
 */
export function estimateDatumProtoBytes(datum: Datum): number {
  let bytes = 0;
  for (const chunk of datum.model_input.chunks) {
    bytes +=
      chunk.type === "encoded_text"
        ? chunk.tokens.length * 4
        : chunk.type === "image"
          ? chunk.data.length
          : chunk.location.length;
  }
  for (const tensor of Object.values(datum.loss_fn_inputs)) {
    bytes += tensor.data.length * (tensor.dtype === "int64" ? 8 : 4);
    bytes += 8 * ((tensor.sparse_crow_indices?.length ?? 0) + (tensor.sparse_col_indices?.length ?? 0));
  }
  return bytes;
}

/** Splits `items` into consecutive chunks within `limits`, sizing each with `bytesOf` (an item larger than `maxBytes` goes alone). */
export function chunkBySize<T>(items: readonly T[], bytesOf: (item: T) => number, limits: ChunkLimits): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (current.length > 0 && (current.length >= limits.maxDatums || bytes + size > limits.maxBytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** Splits `data` into consecutive chunks within `limits` by {@link estimateDatumBytes} (a datum larger than `maxBytes` goes alone). */
export function chunkDatums(data: readonly Datum[], limits: ChunkLimits): Datum[][] {
  return chunkBySize(data, estimateDatumBytes, limits);
}

function weightedMean(values: number[], weights: number[]): number {
  const total = weights.reduce((a, b) => a + b, 0);
  return total > 0
    ? values.reduce((sum, v, i) => sum + v * weights[i]!, 0) / total
    : values.reduce((a, b) => a + b, 0) / values.length;
}

/** An order-insensitive combination of hash values (FNV-1a over the sorted values). */
function unorderedHash(values: number[]): number {
  let h = 0x811c9dc5;
  for (const v of [...values].sort((a, b) => a - b)) {
    h = Math.imul(h ^ (Math.trunc(v) >>> 0), 0x01000193) >>> 0;
  }
  return h;
}

/**
 * Reduces the metrics of chunk results: `mean` and `slack` weighted by datums per chunk, `sum`,
 * `min`, `max`, `hash_unordered` (order-insensitive), `unique` (first value under the key, the
 * others under `key_2`, `key_3`, …). A key without a suffix counts as `mean`. Keys missing from
 * some chunk, or with an unknown reduction, are dropped (as the Tinker SDK does).
 */
export function reduceMetrics(
  metrics: ReadonlyArray<Record<string, number>>,
  weights: readonly number[],
): Record<string, number> {
  const out: Record<string, number> = {};
  const first = metrics[0];
  if (!first) return out;
  for (const key of Object.keys(first)) {
    if (!metrics.every((m) => key in m)) continue;
    const values = metrics.map((m) => m[key]!);
    const reduction = key.includes(":") ? key.slice(key.lastIndexOf(":") + 1) : "mean";
    switch (reduction) {
      case "mean":
        out[key] = weightedMean(values, [...weights]);
        break;
      case "slack":
        out[key] = maxOf(values) - weightedMean(values, [...weights]);
        break;
      case "sum":
        out[key] = values.reduce((a, b) => a + b, 0);
        break;
      case "min":
        out[key] = minOf(values);
        break;
      case "max":
        out[key] = maxOf(values);
        break;
      case "hash_unordered":
        out[key] = unorderedHash(values);
        break;
      case "unique":
        out[key] = values[0]!;
        values.slice(1).forEach((v, i) => (out[`${key}_${i + 2}`] = v));
        break;
    }
  }
  return out;
}

/** Concatenates chunk results in order and reduces their metrics. */
export function combineChunks(results: readonly ForwardBackwardOutput[]): ForwardBackwardOutput {
  if (results.length === 1) return results[0]!;
  return {
    lossFnOutputs: results.flatMap((r) => r.lossFnOutputs),
    metrics: reduceMetrics(
      results.map((r) => r.metrics),
      results.map((r) => r.lossFnOutputs.length),
    ),
  };
}
