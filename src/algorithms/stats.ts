/**
 * Summary statistics for metrics.
 * @module
 */
import { maxOf, minOf } from "../wire/arrays.js";

/** Mean, population standard deviation, minimum and maximum; undefined for no values. */
export function summarize(
  values: readonly number[],
): { mean: number; std: number; min: number; max: number } | undefined {
  if (values.length === 0) return undefined;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const std = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length);
  return { mean, std, min: minOf(values), max: maxOf(values) };
}

/** Adds `<prefix>_mean|_std|_min|_max` of `values` to `metrics` (nothing for no values). */
export function putSummary(
  metrics: Record<string, number>,
  prefix: string,
  values: readonly number[],
  which: ReadonlyArray<"mean" | "std" | "min" | "max"> = ["mean", "std", "min", "max"],
): void {
  const s = summarize(values);
  if (s) for (const key of which) metrics[`${prefix}_${key}`] = s[key];
}
