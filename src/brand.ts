/**
 * Class brands: how nexrl recognises its base classes across copies of the package. A user module
 * imports `BaseRolloutWorker` from `"nexrl"` (the built `dist/`), while the code loading it may
 * hold another copy of the same class (a test importing `src/`, two installs), so identity and
 * `instanceof` are not enough. Each base class carries a stable name under
 * `Symbol.for("nexrl.brand")`, shared by every copy.
 *
 * @example
 * ```ts
 * export abstract class BaseRolloutWorker {
 *   static readonly [NEXRL_BRAND] = "nexrl.BaseRolloutWorker";
 * }
 * ```
 * @module
 */

/** The static property key under which a base class stores its brand. */
export const NEXRL_BRAND: unique symbol = Symbol.for("nexrl.brand");

/** Any class (abstract or not). */
export type AnyClass = abstract new (...args: never[]) => unknown;

/** The brand a class declares itself (not one inherited from a parent), or undefined. */
export function brandOf(cls: unknown): string | undefined {
  if (typeof cls !== "function" || !Object.hasOwn(cls, NEXRL_BRAND)) return undefined;
  const brand: unknown = (cls as unknown as Record<symbol, unknown>)[NEXRL_BRAND];
  return typeof brand === "string" ? brand : undefined;
}

/**
 * True when `cls` is `base` or extends it, directly or not: some class on its prototype chain is
 * `base` itself or declares the same brand as `base`.
 */
export function isDerivedFrom(cls: unknown, base: AnyClass): boolean {
  const brand = brandOf(base);
  for (let current: unknown = cls; typeof current === "function"; current = Object.getPrototypeOf(current)) {
    if (current === base || (brand !== undefined && brandOf(current) === brand)) return true;
  }
  return false;
}

/** The names along a class's prototype chain, e.g. `MyWorker → BaseRolloutWorker`. */
export function classChain(cls: unknown): string[] {
  const names: string[] = [];
  for (
    let current: unknown = cls;
    typeof current === "function" && current !== Function.prototype;
    current = Object.getPrototypeOf(current)
  ) {
    names.push((current as { name?: string }).name || "(anonymous)");
  }
  return names;
}
