/**
 * Reads one recipe file (YAML, or a TS/JS module whose default export is the recipe object)
 * into plain data plus the origin (`file:line`) of every key.
 * @module
 */
import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from "yaml";
import { importFile } from "./import-module.js";
import {
  clonePlain,
  formatKeyPath,
  FORBIDDEN_KEY_MESSAGE,
  forbiddenKeyPaths,
  isPlainMap,
  setOrigins,
  type KeySegment,
  type Origins,
  type PlainMap,
} from "./tree.js";
import { RecipeError } from "../errors.js";

/** A recipe file as read: its data and where each key was written. */
export interface RecipeFileContent {
  /** The file's top-level map. */
  data: PlainMap;
  /** Key path → `file:line` (YAML) or `file` (modules). */
  origins: Origins;
}

/** Most uses of aliases (`*name`) a YAML recipe may make before it is refused as a resource-exhaustion attack. */
const MAX_ALIAS_COUNT = 100;

/** Extensions read as YAML. */
export const YAML_EXTENSIONS = [".yaml", ".yml"] as const;
/** Extensions imported as modules through tsx. */
export const MODULE_EXTENSIONS = [".ts", ".mts", ".cts", ".js", ".mjs", ".cjs"] as const;

/**
 * Reads `file` (absolute). YAML files are parsed with the YAML 1.2 core schema (so `1e-4` is a
 * number); modules are imported and their default export is used.
 * @throws {@link RecipeError} for syntax errors, a top level that is not a map, a module that
 * fails to import or has no suitable default export, or an unsupported extension.
 */
export async function readRecipeFile(file: string): Promise<RecipeFileContent> {
  const extension = extname(file).toLowerCase();
  if ((YAML_EXTENSIONS as readonly string[]).includes(extension)) return readYaml(file);
  if ((MODULE_EXTENSIONS as readonly string[]).includes(extension)) return readModule(file);
  throw RecipeError.fromIssues(
    [
      {
        keyPath: "",
        message: `unsupported recipe file type "${extension}"; use ${[...YAML_EXTENSIONS, ...MODULE_EXTENSIONS].join(", ")}`,
      },
    ],
    { file },
  );
}

/** Parses a YAML recipe and records the line of every key and list item. */
async function readYaml(file: string): Promise<RecipeFileContent> {
  const lineCounter = new LineCounter();
  const document = parseDocument(await readFile(file, "utf8"), { lineCounter, prettyErrors: false });
  if (document.errors.length > 0) {
    const issues = document.errors.map((error) => {
      const at = lineCounter.linePos(error.pos[0]);
      return {
        keyPath: "",
        message: `YAML syntax error at line ${at.line}, column ${at.col}: ${error.message.split("\n")[0]}`,
      };
    });
    throw RecipeError.fromIssues(issues, { file, cause: document.errors[0] });
  }
  let data: unknown;
  try {
    data = document.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) ?? {};
  } catch (error) {
    // The yaml package stops expanding aliases past maxAliasCount (a "billion laughs" file).
    throw RecipeError.fromIssues(
      [
        {
          keyPath: "",
          message: `the YAML cannot be expanded: ${(error as Error).message.split("\n")[0]} (its aliases, such as *name, expand to more than ${MAX_ALIAS_COUNT} copies; write the values out instead)`,
        },
      ],
      { file, cause: error },
    );
  }
  if (!isPlainMap(data)) {
    throw RecipeError.fromIssues(
      [{ keyPath: "", message: "the top level must be a map of keys (`key: value` lines)" }],
      {
        file,
      },
    );
  }
  refuseForbiddenKeys(data, file);
  const origins: Origins = new Map();
  const visit = (node: unknown, path: KeySegment[]): void => {
    if (isMap(node)) {
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const at = [...path, key];
        const range = (pair.key as Node | null)?.range;
        if (range) origins.set(formatKeyPath(at), `${file}:${lineCounter.linePos(range[0]).line}`);
        visit(pair.value, at);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const range = (item as Node | null)?.range;
        if (range) origins.set(formatKeyPath([...path, i]), `${file}:${lineCounter.linePos(range[0]).line}`);
        visit(item, [...path, i]);
      });
    }
  };
  visit(document.contents, []);
  return { data, origins };
}

/** Imports a TS/JS recipe; its default export must be the recipe object. */
async function readModule(file: string): Promise<RecipeFileContent> {
  const result = await importFile(file);
  if (!result.ok) {
    throw RecipeError.fromIssues([{ keyPath: "", message: `cannot import the recipe module: ${result.message}` }], {
      file,
      cause: result.cause,
    });
  }
  const data = result.namespace.default;
  if (!isPlainMap(data)) {
    const exports = Object.keys(result.namespace).filter((name) => name !== "default");
    const found = exports.length > 0 ? ` (it exports ${exports.map((name) => `\`${name}\``).join(", ")})` : "";
    throw RecipeError.fromIssues(
      [{ keyPath: "", message: `the module must \`export default defineRecipe({ ... })\`${found}` }],
      { file },
    );
  }
  refuseForbiddenKeys(data, file);
  const origins: Origins = new Map();
  for (const [key, value] of Object.entries(data)) setOrigins(origins, [key], value, file);
  return { data: clonePlain(data), origins };
}

/**
 * Refuses a recipe that holds `__proto__`, `constructor` or `prototype` anywhere.
 * @throws {@link RecipeError} naming each.
 */
function refuseForbiddenKeys(data: unknown, file: string): void {
  const paths = forbiddenKeyPaths(data);
  if (paths.length > 0)
    throw RecipeError.fromIssues(
      paths.map((keyPath) => ({ keyPath, message: FORBIDDEN_KEY_MESSAGE })),
      { file },
    );
}
