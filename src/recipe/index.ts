/**
 * Recipe loading: YAML/TS recipes, `defaults:` composition, `${…}` interpolation, command-line
 * overrides, the zod schema, path resolution, user-module loading and secret redaction.
 * @module
 */
export { type AnyClass, brandOf, isDerivedFrom, NEXRL_BRAND } from "../brand.js";
export { defineRecipe, type Interpolable, type Interpolation, type RecipeInput } from "./define.js";
export { loadRecipe, type LoadedRecipe, type LoadRecipeOptions } from "./load.js";
export { parseModuleReference, type ModuleReference } from "./module-ref.js";
export {
  findRecipeFile,
  resolveRecipePath,
  type FoundPath,
  type PathBase,
  type ResolveRecipePathOptions,
} from "./paths.js";
export { REDACTED, isSecretKey, redactSecrets, redactText } from "./redact.js";
export type { RecipeConfig } from "./schema/recipe.js";
export { DEFAULT_LOCAL_MODEL } from "./schema/service.js";
export { loadUserClass, type ConcreteClass, type LoadUserClassOptions } from "./user-module.js";
