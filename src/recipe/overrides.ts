/**
 * Hydra-style command-line overrides: `trainer.total_train_steps=10`, `+new.key=v` (the key must
 * not exist yet) and `++key=v` (set whether or not it exists). Values are parsed as YAML, so
 * `a.b=[1,2]`, `x=null` and `s="quoted"` work, and `key=` sets the empty string. A plain override
 * of a key the schema does not know is reported by the schema, with a suggestion.
 * @module
 */
import { parse as parseYaml } from "yaml";
import { isSecretKey, redactText } from "./redact.js";
import {
  childOf,
  FORBIDDEN_KEY_MESSAGE,
  forbiddenKeyPaths,
  formatKeyPath,
  isForbiddenKey,
  isPlainMap,
  parseKeyPath,
  setOrigins,
  type KeySegment,
} from "./tree.js";
import type { RecipeFileContent } from "./read.js";
import { RecipeError, type RecipeIssue } from "../errors.js";

/** Key syntax: dotted names, optional list indices. */
const KEY = /^[A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*$/;

/**
 * Applies `overrides` to a composed recipe in place, recording each as the origin of the keys it
 * sets.
 * @param file the recipe file, for error messages.
 * @param env the environment, so that secret values never appear in messages.
 * @throws {@link RecipeError} listing every malformed or inapplicable override.
 */
export function applyOverrides(
  recipe: RecipeFileContent,
  overrides: readonly string[],
  file: string,
  env: Readonly<Record<string, string | undefined>>,
): void {
  const issues: RecipeIssue[] = [];
  for (const raw of overrides) {
    const problem = applyOne(recipe, raw, env);
    if (problem !== undefined) issues.push(problem);
  }
  if (issues.length > 0) throw RecipeError.fromIssues(issues, { file });
}

/** Applies one override; returns the problem, if any. */
function applyOne(
  recipe: RecipeFileContent,
  raw: string,
  env: Readonly<Record<string, string | undefined>>,
): RecipeIssue | undefined {
  const equals = raw.indexOf("=");
  const prefix = /^\+{0,2}/.exec(raw)![0];
  const keyText = equals < 0 ? raw.slice(prefix.length) : raw.slice(prefix.length, equals);
  const lastName = keyText.split(".").pop() ?? "";
  const shown = equals >= 0 && isSecretKey(lastName) ? `${raw.slice(0, equals)}=***` : redactText(raw, env);
  const where = `command-line override \`${shown}\``;
  if (equals < 0 || !KEY.test(keyText)) {
    return {
      keyPath: keyText,
      message: "malformed override; write `key.path=value` (or `+key.path=value` to add a key)",
      definedIn: where,
    };
  }
  const path = parseKeyPath(keyText);
  const keyPath = formatKeyPath(path);
  const valueText = raw.slice(equals + 1);
  let value: unknown;
  try {
    value = valueText === "" ? "" : parseYaml(valueText);
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
    return { keyPath, message: `cannot parse the value as YAML: ${reason}`, definedIn: where };
  }
  const forbidden = path.some(isForbiddenKey) ? keyPath : forbiddenKeyPaths(value, path)[0];
  if (forbidden !== undefined) return { keyPath: forbidden, message: FORBIDDEN_KEY_MESSAGE, definedIn: where };
  let parent: unknown = recipe.data;
  for (const [depth, segment] of path.entries()) {
    const isLast = depth === path.length - 1;
    const existing = childOf(parent, segment);
    if (isLast && prefix === "+" && existing !== undefined) {
      return {
        keyPath,
        message: "`+` adds a new key, but this key already exists; drop the `+` to override it",
        definedIn: where,
      };
    }
    let next = existing;
    if (isLast || existing === undefined || existing === null) {
      next = isLast ? value : {};
      if (!setChild(parent, segment, next)) {
        return {
          keyPath,
          message: `cannot set \`${formatKeyPath(path.slice(0, depth + 1))}\`: ${whyNot(parent, segment)}`,
          definedIn: where,
        };
      }
    }
    parent = next;
  }
  setOrigins(recipe.origins, path, value, where);
  return undefined;
}

/** Why `segment` cannot be set inside `parent`. */
function whyNot(parent: unknown, segment: KeySegment): string {
  if (Array.isArray(parent)) {
    return typeof segment === "number"
      ? `the list has ${parent.length} item${parent.length === 1 ? "" : "s"}`
      : "the parent is a list; use an index such as [0]";
  }
  return `the parent is ${parent === null ? "null" : typeof parent}, not a map`;
}

/** Sets a map key or an existing list index; false when `parent` cannot hold `segment`. */
function setChild(parent: unknown, segment: KeySegment, value: unknown): boolean {
  if (Array.isArray(parent)) {
    if (typeof segment !== "number" || segment >= parent.length) return false;
    parent[segment] = value;
    return true;
  }
  if (!isPlainMap(parent)) return false;
  parent[String(segment)] = value;
  return true;
}
