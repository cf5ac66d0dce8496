/**
 * Paths written in recipes (data files, user modules, agent files) resolve from the recipe's
 * folder first, then from the current directory.
 * @module
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { formatModuleReference, parseModuleReference } from "./module-ref.js";
import type { RecipeConfig } from "./schema/recipe.js";
import { formatKeyPath, originOf, type KeySegment, type Origins } from "./tree.js";
import { RecipeError, type RecipeIssue } from "../errors.js";

/** Where relative recipe paths are looked up. */
export interface PathBase {
  /** The recipe file's folder (searched first). */
  recipeDir: string;
  /** The current directory (searched second); defaults to `process.cwd()`. */
  cwd?: string;
}

/** The outcome of {@link findRecipeFile}: the absolute path found, and every place tried. */
export interface FoundPath {
  /** The first existing candidate, if any. */
  found: string | undefined;
  /** Absolute candidates in the order tried. */
  tried: string[];
}

/** Looks `value` up beside the recipe, then in the current directory (absolute paths as they are). */
export function findRecipeFile(value: string, base: PathBase): FoundPath {
  const candidates = isAbsolute(value)
    ? [value]
    : [resolve(base.recipeDir, value), resolve(base.cwd ?? process.cwd(), value)];
  const tried = [...new Set(candidates)];
  return { found: tried.find((candidate) => existsSync(candidate)), tried };
}

/** The message for a path that was not found, listing the places tried. */
export function notFoundMessage(value: string, tried: readonly string[]): string {
  const places = tried.length === 1 ? tried[0] : `${tried[0]} (beside the recipe) and ${tried[1]} (current directory)`;
  return `\`${value}\` not found; tried ${places}`;
}

/** Options of {@link resolveRecipePath}. */
export interface ResolveRecipePathOptions extends PathBase {
  /** The key that holds the path, for the error (`data.data_files[0]`). */
  keyPath: string;
  /** The recipe file, for the error. */
  file?: string;
}

/**
 * The absolute path of a file or folder named in a recipe, looked up beside the recipe first and
 * then in the current directory.
 * @throws {@link RecipeError} naming the key path and both places tried when it exists in neither.
 */
export function resolveRecipePath(value: string, options: ResolveRecipePathOptions): string {
  const { found, tried } = findRecipeFile(value, options);
  if (found !== undefined) return found;
  throw RecipeError.fromIssues([{ keyPath: options.keyPath, message: notFoundMessage(value, tried) }], {
    file: options.file,
  });
}

/**
 * A copy of `config` whose data files, user-module paths and agent paths are absolute.
 * @throws {@link RecipeError} listing every path found in neither place.
 */
export function resolveConfigPaths(config: RecipeConfig, base: PathBase, file: string, origins: Origins): RecipeConfig {
  const issues: RecipeIssue[] = [];
  const at = (value: string, path: KeySegment[]): string => {
    const { found, tried } = findRecipeFile(value, base);
    if (found !== undefined) return found;
    issues.push({
      keyPath: formatKeyPath(path),
      message: notFoundMessage(value, tried),
      definedIn: originOf(origins, path),
    });
    return value;
  };
  const out = structuredClone(config);
  out.data.data_files = out.data.data_files?.map((value, i) => at(value, ["data", "data_files", i]));
  const validation = out.validate.data;
  if (validation)
    validation.data_files = validation.data_files?.map((value, i) => at(value, ["validate", "data", "data_files", i]));
  const worker = out.rollout_worker;
  for (const key of [
    "custom_rollout_worker_module_path",
    "nexau_agent_config_path",
    "nexau_agent_workspace",
  ] as const) {
    const value = worker[key];
    if (value !== undefined) worker[key] = at(value, ["rollout_worker", key]);
  }
  if (worker.evaluator_module_path !== undefined) {
    const reference = parseModuleReference(worker.evaluator_module_path);
    const modulePath = at(reference.modulePath, ["rollout_worker", "evaluator_module_path"]);
    worker.evaluator_module_path = formatModuleReference({ ...reference, modulePath });
  }
  if (out.init?.from_recipe !== undefined) out.init.from_recipe = at(out.init.from_recipe, ["init", "from_recipe"]);
  const trainer = out.trainer;
  if (trainer.custom_trainer_module_path !== undefined) {
    trainer.custom_trainer_module_path = at(trainer.custom_trainer_module_path, [
      "trainer",
      "custom_trainer_module_path",
    ]);
  }
  if (issues.length > 0) throw RecipeError.fromIssues(issues, { file });
  return out;
}
