/**
 * Imports a user file (.ts, .mts, .js, …) through tsx's ESM API, so TypeScript needs no build
 * step, and describes import failures with their location.
 * @module
 */
import { pathToFileURL } from "node:url";
import { tsImport } from "tsx/esm/api";
import { isCommonJsFile, sharePackage } from "./share-package.js";

/** What {@link importFile} returns: the namespace, or why the import failed. */
export type ImportResult =
  | { readonly ok: true; readonly namespace: Record<string, unknown> }
  | { readonly ok: false; readonly message: string; readonly cause: unknown };

/**
 * Imports `file` (an absolute path). Each call evaluates the module afresh. A failure to compile
 * or an exception thrown on import is returned, described with its location. Files that tsx
 * compiles to CommonJS (a `.ts` file outside a `"type": "module"` package) give the same
 * namespace as ES modules, and get the running nexrl when they require it (see {@link sharePackage}).
 */
export async function importFile(file: string): Promise<ImportResult> {
  if (isCommonJsFile(file)) await sharePackage();
  try {
    const namespace = (await tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
    return { ok: true, namespace: unwrapCommonJs(namespace) };
  } catch (cause) {
    return { ok: false, message: describeImportError(file, cause), cause };
  }
}

/**
 * The ES namespace of a module that tsx compiled to CommonJS: Node exposes its `module.exports`
 * (marked `__esModule`) as `default`, so the real default export is `default.default`.
 */
function unwrapCommonJs(namespace: Record<string, unknown>): Record<string, unknown> {
  const exports = namespace.default;
  if (typeof exports !== "object" || exports === null || (exports as { __esModule?: unknown }).__esModule !== true)
    return namespace;
  return { ...(exports as Record<string, unknown>) };
}

/** Escapes a string for use inside a regular expression. */
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * The error's message plus, for runtime errors, `at file:line:column` of the first stack frame
 * in `file` (compile errors from esbuild already carry their location in the message).
 */
function describeImportError(file: string, error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const frame = new RegExp(`${escapeRegExp(file)}(?:\\?[^:\\s)]*)?:(\\d+):(\\d+)`);
  for (const line of (error.stack ?? "").split("\n").slice(1)) {
    const match = frame.exec(safeDecode(line));
    if (match) return `${error.message} (at ${file}:${match[1]}:${match[2]})`;
  }
  return error.message;
}

/** decodeURIComponent that returns its input when it is not valid percent-encoding. */
function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
