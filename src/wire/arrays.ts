/**
 * Array helpers that hold for arrays of any length. Spreading an array into a call
 * (`target.push(...items)`, `Math.max(...values)`) passes every element as an argument on the
 * stack, and past roughly a hundred thousand elements throws `RangeError: Maximum call stack
 * size exceeded`; prompts, datasets and token sequences get that long. ESLint refuses such
 * spreads in `src/`.
 * @module
 */

/** Appends the elements of each of `sources` to `target`, in order; returns `target`. */
export function appendAll<T>(target: T[], ...sources: ReadonlyArray<ArrayLike<T>>): T[] {
  for (const source of sources) for (let i = 0; i < source.length; i++) target.push(source[i]!);
  return target;
}

/** The largest of `values` (`-Infinity` for none), as `Math.max` would give. */
export function maxOf(values: Iterable<number>): number {
  let max = -Infinity;
  for (const v of values) max = Math.max(max, v);
  return max;
}

/** The smallest of `values` (`Infinity` for none), as `Math.min` would give. */
export function minOf(values: Iterable<number>): number {
  let min = Infinity;
  for (const v of values) min = Math.min(min, v);
  return min;
}
