/**
 * Typed TS recipes: `export default defineRecipe({ ... })`.
 * @module
 */
import type { z } from "zod";
import type { recipeSchema } from "./schema/recipe.js";

/** A string holding an interpolation, such as `"${oc.env:TINKER_API_KEY}"` or `"${data.batch_size}"`. */
export type Interpolation = `${string}\${${string}}${string}`;

/** `T` where any value may instead be an interpolation string, resolved when the recipe loads. */
export type Interpolable<T> =
  | Interpolation
  | (T extends readonly (infer Item)[]
      ? Interpolable<Item>[]
      : T extends object
        ? { [K in keyof T]: Interpolable<T[K]> }
        : T);

/**
 * What a user writes: the recipe's keys in snake_case as in YAML, every defaulted key optional,
 * any value replaceable by an interpolation, plus Hydra's `defaults:` list.
 */
export type RecipeInput = Interpolable<z.input<typeof recipeSchema>> & {
  /** Recipe files merged under (or over, see `_self_`) this one, e.g. `["common", "_self_"]`. */
  defaults?: string[];
};

/**
 * Declares a TS recipe. It returns its argument unchanged; its type makes editors complete and
 * check the keys. The recipe is validated by the same schema as YAML recipes when loaded.
 *
 * @example
 * ```ts
 * // recipe.ts
 * import { defineRecipe } from "nexrl";
 *
 * export default defineRecipe({
 *   data: { data_files: ["data/train.jsonl"], prompt_key: "input" },
 *   rollout_worker: { type: "pig_latin" },
 *   trainer: { type: "remote_api_cross_entropy", total_train_steps: 20 },
 *   service: { train_service: { backend: "local", model: "tiny" } },
 * });
 * ```
 */
export function defineRecipe(config: RecipeInput): RecipeInput {
  return config;
}
