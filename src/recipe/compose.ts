/**
 * Hydra-style composition: a recipe's `defaults:` list names other recipe files (resolved beside
 * the file that lists them) that are merged in list order, with `_self_` marking where the file's
 * own keys go (last when absent, as in Hydra ≥ 1.1). Included files may have defaults of their
 * own. Unlike Hydra config groups, every entry is merged at the top level.
 * @module
 */
import { existsSync, readdirSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import { mergeInto } from "./merge.js";
import { readRecipeFile, YAML_EXTENSIONS, MODULE_EXTENSIONS, type RecipeFileContent } from "./read.js";
import { didYouMean } from "./suggest.js";
import { formatKeyPath } from "./tree.js";
import { appendAll } from "../wire/arrays.js";
import { RecipeError } from "../errors.js";

/** A composed recipe: merged data, origins, and the files merged, lowest precedence first. */
export interface ComposedRecipe extends RecipeFileContent {
  /** Absolute paths of the files merged, in merge order (later files override earlier ones). */
  files: string[];
}

/** The marker for the including file's own keys in a `defaults:` list. */
const SELF = "_self_";

/**
 * Reads `file` and everything its `defaults:` lists name, recursively, and merges them.
 * @param file absolute path of the recipe.
 * @throws {@link RecipeError} for a malformed `defaults:` list, a missing file, or a cycle.
 */
export async function composeRecipe(file: string): Promise<ComposedRecipe> {
  return compose(file, [file]);
}

/** Composes `file`; `chain` is the include chain from the primary recipe down to `file`. */
async function compose(file: string, chain: string[]): Promise<ComposedRecipe> {
  const root = chain[0]!;
  const own = await readRecipeFile(file);
  const entries = defaultsOf(own, root);
  delete own.data.defaults;
  const result: ComposedRecipe = { data: {}, origins: new Map(), files: [] };
  const order = entries.includes(SELF) ? entries : [...entries, SELF];
  for (const [index, entry] of order.entries()) {
    if (entry === SELF) {
      mergeInto(result, own);
      result.files.push(file);
      continue;
    }
    const keyPath = formatKeyPath(["defaults", index]);
    const included = findDefault(entry, dirname(file), keyPath, root, own);
    if (chain.includes(included)) {
      const cycle = [...chain.slice(chain.indexOf(included)), included].join(" → ");
      throw RecipeError.fromIssues(
        [{ keyPath, message: `defaults cycle: ${cycle}`, definedIn: own.origins.get(keyPath) }],
        {
          file: root,
        },
      );
    }
    const child = await compose(included, [...chain, included]);
    mergeInto(result, child);
    appendAll(result.files, child.files);
  }
  return result;
}

/** Validates and returns the `defaults:` list of a file (empty when absent); `root` is the primary recipe. */
function defaultsOf(content: RecipeFileContent, root: string): string[] {
  const list = content.data.defaults;
  if (list === undefined || list === null) return [];
  const problem = (keyPath: string, message: string): RecipeError =>
    RecipeError.fromIssues([{ keyPath, message, definedIn: content.origins.get(keyPath) }], { file: root });
  if (!Array.isArray(list))
    throw problem("defaults", "expected a list of recipe file names, e.g. `defaults: [common, _self_]`");
  list.forEach((entry, index) => {
    if (typeof entry !== "string" || entry.trim() === "") {
      throw problem(
        formatKeyPath(["defaults", index]),
        "expected a recipe file name such as `common` or `path/to/base.yaml` (Hydra config groups like `db: mysql` are not supported)",
      );
    }
  });
  if (list.filter((entry) => entry === SELF).length > 1) throw problem("defaults", "`_self_` may appear only once");
  return list as string[];
}

/**
 * Resolves a `defaults:` entry beside the including file: `common` tries `common.yaml` then
 * `common.yml`; a name with a recipe extension is used as written. `root` is the primary recipe.
 */
function findDefault(entry: string, dir: string, keyPath: string, root: string, content: RecipeFileContent): string {
  const known = [...YAML_EXTENSIONS, ...MODULE_EXTENSIONS] as readonly string[];
  const names = known.includes(extname(entry).toLowerCase())
    ? [entry]
    : YAML_EXTENSIONS.map((extension) => `${entry}${extension}`);
  const tried = names.map((name) => resolve(dir, name));
  const found = tried.find((candidate) => existsSync(candidate));
  if (found !== undefined) return found;
  const folder = dirname(tried[0]!);
  const siblings = (existsSync(folder) ? readdirSync(folder, { withFileTypes: true }) : [])
    .filter((dirent) => dirent.isFile() && (YAML_EXTENSIONS as readonly string[]).includes(extname(dirent.name)))
    .map((dirent) => basename(dirent.name, extname(dirent.name)));
  const suggestion = didYouMean(basename(entry, extname(entry)), siblings);
  const hint = suggestion === undefined ? "" : `; did you mean \`${suggestion}\`?`;
  throw RecipeError.fromIssues(
    [
      {
        keyPath,
        message: `cannot find \`${entry}\` (tried ${tried.join(", ")})${hint}`,
        definedIn: content.origins.get(keyPath),
        suggestion,
      },
    ],
    { file: root },
  );
}
