/**
 * Loads user classes named by a recipe (custom rollout workers, custom trainers, evaluators)
 * through tsx, so TypeScript files need no build step, and checks they extend the expected
 * nexrl base class.
 * @module
 */
import { classChain, isDerivedFrom, type AnyClass } from "../brand.js";
import { importFile } from "./import-module.js";
import { findRecipeFile, notFoundMessage } from "./paths.js";
import { didYouMean } from "./suggest.js";
import { RecipeError, type UserModuleFailure } from "../errors.js";

/** Options of {@link loadUserClass}. */
export interface LoadUserClassOptions<Base extends AnyClass> {
  /** The module file as written in the recipe (relative to the recipe's folder or the current directory, or absolute). */
  modulePath: string;
  /** The export to take (`"default"` for the default export). */
  exportName: string;
  /** The nexrl base class the export must extend (any copy of it: checked by identity or brand). */
  expectedBase: Base;
  /**
   * An interface a class may implement instead of extending `expectedBase`: its name, and the
   * methods its instances must have (looked up on the class's prototype chain).
   */
  orImplements?: { readonly name: string; readonly methods: readonly string[] };
  /** The recipe's folder, searched first. */
  recipeDir: string;
  /** Searched second; defaults to `process.cwd()`. */
  cwd?: string;
  /** The recipe key that named the module, for errors (`rollout_worker.custom_rollout_worker_module_path`). */
  keyPath: string;
  /** The recipe file, for errors. */
  recipeFile?: string;
}

/** A concrete subclass of `Base`, constructible with `Base`'s parameters. */
export type ConcreteClass<Base extends AnyClass> = new (...args: ConstructorParameters<Base>) => InstanceType<Base>;

/** Whether instances of `cls` have each of `methods` (on its prototype chain). */
function hasMethods(cls: AnyClass, methods: readonly string[]): boolean {
  const prototype = cls.prototype as Record<string, unknown> | undefined;
  return methods.every((method) => typeof prototype?.[method] === "function");
}

/** True for `class` syntax (not plain functions or arrow functions). */
function isClass(value: unknown): value is AnyClass {
  return typeof value === "function" && /^class[\s{]/.test(Function.prototype.toString.call(value));
}

/**
 * Imports `modulePath` and returns its `exportName` export after checking it is a class derived
 * from `expectedBase`.
 *
 * @example
 * ```ts
 * const Worker = await loadUserClass({
 *   modulePath: config.rollout_worker.custom_rollout_worker_module_path!,
 *   exportName: config.rollout_worker.custom_rollout_worker_class_name,
 *   expectedBase: BaseRolloutWorker,
 *   recipeDir: recipe.dir,
 *   keyPath: "rollout_worker.custom_rollout_worker_module_path",
 * });
 * ```
 * @throws {@link RecipeError} when the file is missing (listing the places tried), fails to
 * compile or throws on import (with the cause and its location), lacks the export (listing those
 * it has), exports something that is not a class, or a class that does not extend `expectedBase`.
 */
export async function loadUserClass<Base extends AnyClass>(
  options: LoadUserClassOptions<Base>,
): Promise<ConcreteClass<Base>> {
  const { modulePath, exportName, expectedBase, keyPath } = options;
  const fail = (reason: UserModuleFailure, message: string, cause?: unknown): RecipeError =>
    RecipeError.fromIssues([{ keyPath, message }], { ...{ file: options.recipeFile, cause }, code: reason });
  const { found, tried } = findRecipeFile(modulePath, options);
  if (found === undefined)
    throw fail(
      "not_found",
      `${notFoundMessage(modulePath, tried)}; fix the path (relative paths start from the recipe's folder)`,
    );
  const imported = await importFile(found);
  if (!imported.ok) throw fail("import_failed", `cannot import ${found}: ${imported.message}`, imported.cause);
  const exports = imported.namespace;
  const baseName = expectedBase.name;
  if (!Object.hasOwn(exports, exportName) || exports[exportName] === undefined) {
    const names = Object.keys(exports).filter((name) => name !== "default" || isClass(exports.default));
    const suggestion = didYouMean(exportName, names);
    const has =
      names.length === 0 ? "it has no exports" : `its exports are ${names.map((name) => `\`${name}\``).join(", ")}`;
    const hint =
      suggestion === undefined ? `; export a class that extends ${baseName}` : `; did you mean \`${suggestion}\`?`;
    throw fail("missing_export", `${found} has no export \`${exportName}\`; ${has}${hint}`);
  }
  const value = exports[exportName];
  if (!isClass(value)) {
    const kind = typeof value === "function" ? "a function" : value === null ? "null" : `a ${typeof value}`;
    throw fail(
      "not_a_class",
      `\`${exportName}\` in ${found} is ${kind}, not a class; export \`class ${exportName} extends ${baseName}\``,
    );
  }
  const implemented = options.orImplements;
  if (!isDerivedFrom(value, expectedBase) && !(implemented && hasMethods(value, implemented.methods))) {
    const or =
      implemented === undefined
        ? ""
        : ` nor implement ${implemented.name} (it lacks ${implemented.methods
            .filter((method) => !hasMethods(value, [method]))
            .map((method) => `${method}()`)
            .join(", ")})`;
    const fix =
      implemented === undefined
        ? ""
        : `, or give it ${implemented.methods.map((method) => `${method}()`).join(" and ")}`;
    throw fail(
      "wrong_base",
      `\`${exportName}\` in ${found} does not extend ${baseName}${or} (its chain: ${classChain(value).join(" → ")}); ` +
        `declare it as \`class ${exportName} extends ${baseName}\`, importing ${baseName} from "nexrl"${fix}`,
    );
  }
  return value as unknown as ConcreteClass<Base>;
}
