/**
 * Where a worker thread of the engine finds its module: next to the calling module, as `.js`
 * in the compiled package, or as `.ts` when run from the TypeScript sources (tests, `tsx`), in
 * which case the worker first registers tsx's loader; the compiled package never loads tsx.
 *
 * @module
 * @internal
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/** URL of tsx's ESM API (`tsx/esm/api` under the `import` condition), found from `base`. */
function tsxEsmApi(base: string): string {
  const manifest = createRequire(base).resolve("tsx/package.json");
  const { exports } = JSON.parse(readFileSync(manifest, "utf8")) as {
    exports: Record<string, { import: { default: string } }>;
  };
  return new URL(exports["./esm/api"]!.import.default, pathToFileURL(manifest)).href;
}

/**
 * The module `stem` next to `self` (an `import.meta.url`) as a worker loads it: `entry`, its
 * URL, and `register`, the statement a worker's entry runs before importing it (empty in the
 * compiled package).
 */
export function workerModule(self: string, stem: string): { entry: string; register: string } {
  const fromSources = self.endsWith(".ts");
  const entry = new URL(`./${stem}${fromSources ? ".ts" : ".js"}`, self).href;
  const register = fromSources ? `(await import(${JSON.stringify(tsxEsmApi(self))})).register();` : "";
  return { entry, register };
}
