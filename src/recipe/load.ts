/**
 * `loadRecipe`: compose, override, interpolate, validate, resolve paths.
 * @module
 */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { composeRecipe } from "./compose.js";
import { interpolate } from "./interpolate.js";
import { applyOverrides } from "./overrides.js";
import { resolveConfigPaths } from "./paths.js";
import type { RecipeConfig } from "./schema/recipe.js";
import { validateRecipe } from "./validate.js";
import { RecipeError } from "../errors.js";

/** Options of {@link loadRecipe}. */
export interface LoadRecipeOptions {
  /** Dotted command-line overrides, applied after composition: `trainer.total_train_steps=10`, `+new.key=v`. */
  overrides?: readonly string[];
  /** Environment for `${oc.env:…}` and for keeping secrets out of messages; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Current directory: resolves a relative recipe path and is searched second for recipe paths; defaults to `process.cwd()`. */
  cwd?: string;
}

/** A loaded, validated recipe. */
export interface LoadedRecipe {
  /** The parsed recipe, with data files and module paths made absolute. */
  config: RecipeConfig;
  /** Absolute path of the recipe file. */
  path: string;
  /** Its folder. */
  dir: string;
  /** Every composed file, in merge order (later files override earlier ones). */
  files: string[];
}

/**
 * Loads a recipe (`.yaml`, `.yml`, or a `.ts`/`.mts`/`.js` module whose default export is
 * {@link defineRecipe}'s argument): merges its `defaults:`, applies `overrides`, resolves
 * `${…}` interpolations, validates it against the schema, and resolves its data files and module
 * paths (beside the recipe first, then in the current directory).
 *
 * @example
 * ```ts
 * const { config } = await loadRecipe("recipe/pig_latin/local.yaml", { overrides: ["trainer.total_train_steps=5"] });
 * ```
 * @throws {@link RecipeError} listing every problem found, each with its key path and file.
 */
export async function loadRecipe(path: string, options: LoadRecipeOptions = {}): Promise<LoadedRecipe> {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const file = resolve(cwd, path);
  if (!existsSync(file))
    throw RecipeError.fromIssues([{ keyPath: "", message: `recipe file not found: ${file}` }], { file });
  const composed = await composeRecipe(file);
  applyOverrides(composed, options.overrides ?? [], file, env);
  const data = interpolate(composed.data, composed.origins, env, file);
  const parsed = validateRecipe(data, { origins: composed.origins, file, env });
  const dir = dirname(file);
  const config = resolveConfigPaths(parsed, { recipeDir: dir, cwd }, file, composed.origins);
  return { config, path: file, dir, files: composed.files };
}
