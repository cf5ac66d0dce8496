/**
 * Deep merge of composed recipe files: maps merge key by key; lists, scalars and null replace.
 * @module
 */
import {
  childOf,
  clonePlain,
  formatKeyPath,
  isPlainMap,
  replaceOrigins,
  type KeySegment,
  type PlainMap,
} from "./tree.js";
import type { RecipeFileContent } from "./read.js";

/**
 * Merges `source` into `target` in place (`source` wins), carrying over the origin of every key
 * it sets.
 */
export function mergeInto(target: RecipeFileContent, source: RecipeFileContent): void {
  mergeMaps(target.data, source.data, [], target, source);
}

/** Recursive step of {@link mergeInto}. */
function mergeMaps(
  into: PlainMap,
  from: PlainMap,
  path: KeySegment[],
  target: RecipeFileContent,
  source: RecipeFileContent,
): void {
  for (const [key, value] of Object.entries(from)) {
    const at = [...path, key];
    // Own keys only: `into["__proto__"]` would be Object.prototype itself (readers refuse such keys too).
    const current = childOf(into, key);
    if (isPlainMap(current) && isPlainMap(value)) {
      mergeMaps(current, value, at, target, source);
    } else {
      into[key] = clonePlain(value);
      replaceOrigins(target.origins, formatKeyPath(at), source.origins);
    }
  }
}
