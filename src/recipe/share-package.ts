/**
 * Makes the running nexrl the one CommonJS user modules get: they `require("nexrl")` through the
 * package's CommonJS entry (`dist/index.cjs`), which hands out the module registered here instead
 * of loading a second copy (see `src/index.cts`).
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";

/** The key of the registration on `globalThis`, shared with `src/index.cts`. */
const KEY = Symbol.for("nexrl.package");

let registered: Promise<void> | undefined;

/** Loads the package root; provided from above (the root module itself, the CLI), never imported here. */
let loadPackageRoot: (() => Promise<object>) | undefined;

/**
 * Tells the recipe loader how to load the package root that CommonJS user modules must get:
 * the composition root calls it, so this layer never imports the modules above it.
 */
export function providePackageRoot(load: () => Promise<object>): void {
  loadPackageRoot = load;
}

/**
 * Whether Node and tsx load `file` as CommonJS: a `.cts` / `.cjs` file, or a `.ts` / `.js` file
 * whose nearest `package.json` does not say `"type": "module"`.
 */
export function isCommonJsFile(file: string): boolean {
  const ext = extname(file);
  if (ext === ".cts" || ext === ".cjs") return true;
  if (ext === ".mts" || ext === ".mjs") return false;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      try {
        return (JSON.parse(readFileSync(manifest, "utf8")) as { type?: unknown }).type !== "module";
      } catch {
        return true;
      }
    }
    if (dirname(dir) === dir) return true;
  }
}

/**
 * Registers this copy of nexrl (its root module and version) for CommonJS user modules, once per
 * process. ES-module user files do not need it, and skip the cost of loading every layer. Without a
 * provided root (a program that imports internal modules only) nothing is registered, and
 * `require("nexrl")` loads the package's own entry.
 */
export function sharePackage(): Promise<void> {
  return (registered ??= (async () => {
    const global = globalThis as Record<symbol, unknown>;
    if (global[KEY] !== undefined || loadPackageRoot === undefined) return;
    const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    // The root module is loaded when the first CommonJS user module loads, not up front: it
    // loads every layer.
    global[KEY] = { version, module: await loadPackageRoot() };
  })());
}
