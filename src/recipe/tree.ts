/**
 * Plain-data helpers shared by composition, overrides and interpolation: key paths, map checks,
 * and the record of which file set each key.
 * @module
 */

/** One step of a key path: a map key or a list index. */
export type KeySegment = string | number;

/** A plain (JSON/YAML-like) map. */
export type PlainMap = Record<string, unknown>;

/** True for `{…}` literals and parsed YAML maps; false for lists, null, class instances. */
export function isPlainMap(value: unknown): value is PlainMap {
  if (typeof value !== "object" || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Keys no recipe may hold: assigning them changes an object's prototype instead of adding a key,
 * which a merge would turn into a change of every object in the process (prototype pollution).
 */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** Whether `key` is one of the keys no recipe may hold (`__proto__`, `constructor`, `prototype`). */
export function isForbiddenKey(key: KeySegment): boolean {
  return typeof key === "string" && FORBIDDEN_KEYS.has(key);
}

/** The paths of every forbidden key (see {@link isForbiddenKey}) in plain data, outermost first. */
export function forbiddenKeyPaths(value: unknown, path: KeySegment[] = []): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => forbiddenKeyPaths(item, [...path, i]));
  if (!isPlainMap(value)) return [];
  return Object.keys(value).flatMap((key) =>
    isForbiddenKey(key) ? [formatKeyPath([...path, key])] : forbiddenKeyPaths(value[key], [...path, key]),
  );
}

/** The message of a forbidden key in a recipe. */
export const FORBIDDEN_KEY_MESSAGE =
  "not a recipe key: `__proto__`, `constructor` and `prototype` would change the objects of the process rather than set a value; remove it";

/** Formats a key path as written in recipes and errors: `data.data_files[0]`. */
export function formatKeyPath(path: readonly KeySegment[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else out += out === "" ? segment : `.${segment}`;
  }
  return out;
}

/** Splits `a.b[0].c` (or `a.b.0.c`) into segments; numeric segments become list indices. */
export function parseKeyPath(text: string): KeySegment[] {
  const segments: KeySegment[] = [];
  for (const part of text.split(".")) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    const name = match?.[1] ?? part;
    if (name !== "") segments.push(/^\d+$/.test(name) ? Number(name) : name);
    for (const index of match?.[2]?.matchAll(/\[(\d+)\]/g) ?? []) segments.push(Number(index[1]));
  }
  return segments;
}

/** The child of a map or list, or undefined when absent. */
export function childOf(parent: unknown, segment: KeySegment): unknown {
  if (Array.isArray(parent) && typeof segment === "number") return parent[segment];
  if (isPlainMap(parent) && Object.hasOwn(parent, String(segment))) return parent[String(segment)];
  return undefined;
}

/** Deep copy of plain data (maps and lists are copied; other values are shared). */
export function clonePlain<T>(value: T): T {
  if (Array.isArray(value)) return value.map(clonePlain) as T;
  if (isPlainMap(value)) {
    const out: PlainMap = {};
    for (const [key, child] of Object.entries(value)) out[key] = clonePlain(child);
    return out as T;
  }
  return value;
}

/**
 * Where each key of a composed recipe was set: formatted key path → `file:line`, `file`, or a
 * description of the command-line override.
 */
export type Origins = Map<string, string>;

/** True when `key` is `prefix` or lies under it. */
function isUnder(key: string, prefix: string): boolean {
  return prefix === "" || key === prefix || key.startsWith(`${prefix}.`) || key.startsWith(`${prefix}[`);
}

/** Replaces the origins of `prefix` and everything under it by those `source` has there. */
export function replaceOrigins(target: Origins, prefix: string, source: Origins): void {
  for (const key of [...target.keys()]) if (isUnder(key, prefix)) target.delete(key);
  for (const [key, where] of source) if (isUnder(key, prefix)) target.set(key, where);
}

/** Marks `prefix` and every key under `value` as set by `where`. */
export function setOrigins(target: Origins, path: readonly KeySegment[], value: unknown, where: string): void {
  const prefix = formatKeyPath(path);
  for (const key of [...target.keys()]) if (isUnder(key, prefix)) target.delete(key);
  const visit = (node: unknown, at: KeySegment[]): void => {
    target.set(formatKeyPath(at), where);
    if (Array.isArray(node)) node.forEach((child, i) => visit(child, [...at, i]));
    else if (isPlainMap(node)) for (const [key, child] of Object.entries(node)) visit(child, [...at, key]);
  };
  visit(value, [...path]);
}

/** The origin of `path`, or of its nearest ancestor that has one. */
export function originOf(origins: Origins, path: readonly KeySegment[]): string | undefined {
  for (let n = path.length; n > 0; n--) {
    const where = origins.get(formatKeyPath(path.slice(0, n)));
    if (where !== undefined) return where;
  }
  return undefined;
}
