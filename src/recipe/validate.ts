/**
 * Checks resolved recipe data against the schema and turns zod issues into {@link RecipeIssue}s
 * that name the key path, the expected shape, a suggestion and the file that set the key.
 * @module
 */
import type { z } from "zod";
import { isSecretKey, redactText } from "./redact.js";
import { recipeSchema, type RecipeConfig } from "./schema/recipe.js";
import { didYouMean } from "./suggest.js";
import { childOf, formatKeyPath, isPlainMap, originOf, type KeySegment, type Origins, type PlainMap } from "./tree.js";
import { RecipeError, type RecipeIssue } from "../errors.js";

/** What {@link validateRecipe} needs besides the data. */
export interface ValidateContext {
  /** Where each key was set. */
  origins: Origins;
  /** The recipe file. */
  file: string;
  /** The environment, so that secret values never appear in messages. */
  env: Readonly<Record<string, string | undefined>>;
}

/**
 * Parses resolved recipe data.
 * @throws {@link RecipeError} listing every problem the schema finds.
 */
export function validateRecipe(data: PlainMap, context: ValidateContext): RecipeConfig {
  const { data: input, alias } = flattenNamedTrainService(data, context);
  const result = recipeSchema.safeParse(input);
  if (result.success) return result.data;
  const issues = result.error.issues.flatMap((issue) => describeIssue(issue, input, alias, context));
  throw RecipeError.fromIssues(issues, { file: context.file });
}

/** Maps a key path of the flattened data back to the path the user wrote. */
type Alias = (path: readonly KeySegment[]) => KeySegment[];

/**
 * NexRL's named form `service.train_service: {main_actor: {backend: …}}` becomes the flat form
 * `service.train_service: {backend: …}`; the alias maps error paths back.
 * @throws {@link RecipeError} when the named form lists several services.
 */
function flattenNamedTrainService(data: PlainMap, context: ValidateContext): { data: PlainMap; alias: Alias } {
  const unchanged = { data, alias: (path: readonly KeySegment[]) => [...path] };
  const service = data.service;
  if (!isPlainMap(service) || !isPlainMap(service.train_service) || "backend" in service.train_service)
    return unchanged;
  const entries = Object.entries(service.train_service);
  if (entries.length === 0 || !entries.every(([, actor]) => isPlainMap(actor))) return unchanged;
  if (entries.length > 1) {
    const names = entries.map(([name]) => `\`${name}\``).join(", ");
    const keyPath = "service.train_service";
    const message = `nexrl trains one model: keep one service here (found ${names}); teachers of on-policy distillation go in \`trainer.teachers\``;
    throw RecipeError.fromIssues([{ keyPath, message, definedIn: context.origins.get(keyPath) }], {
      file: context.file,
    });
  }
  const [name, actor] = entries[0]!;
  const alias: Alias = (path) =>
    path[0] === "service" && path[1] === "train_service"
      ? ["service", "train_service", name, ...path.slice(2)]
      : [...path];
  return { data: { ...data, service: { ...service, train_service: actor } }, alias };
}

/** One zod issue → one issue per offending key. */
function describeIssue(
  issue: z.core.$ZodIssue,
  input: PlainMap,
  alias: Alias,
  context: ValidateContext,
): RecipeIssue[] {
  const path = issue.path.filter((segment): segment is KeySegment => typeof segment !== "symbol");
  const value = valueAt(input, path);
  const make = (at: KeySegment[], message: string, extra: Partial<RecipeIssue> = {}): RecipeIssue => {
    const written = alias(at);
    const missing = at === path && value === undefined;
    return {
      keyPath: formatKeyPath(written),
      message,
      definedIn: missing ? undefined : originOf(context.origins, written),
      ...extra,
    };
  };
  const got = (): string => describeValue(value, path[path.length - 1], context.env);
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = knownKeys(path);
      return issue.keys.map((key) => {
        const suggestion = didYouMean(key, known);
        const hint =
          suggestion !== undefined ? `did you mean \`${suggestion}\`?` : `known keys here: ${known.join(", ")}`;
        return make([...path, key], `unknown key; ${hint}`, suggestion === undefined ? {} : { suggestion });
      });
    }
    case "invalid_type": {
      const expected = TYPE_NAMES[issue.expected] ?? issue.expected;
      const message = value === undefined ? `missing; expected ${expected}` : `expected ${expected}, got ${got()}`;
      return [make(path, message, { expected })];
    }
    case "invalid_value": {
      const options = issue.values.map((option) => JSON.stringify(option));
      const expected = options.length === 1 ? options[0]! : `one of ${options.join(", ")}`;
      const suggestion = typeof value === "string" ? didYouMean(value, issue.values.map(String)) : undefined;
      const hint = suggestion === undefined ? "" : `; did you mean "${suggestion}"?`;
      const message =
        value === undefined ? `missing; expected ${expected}` : `expected ${expected}, got ${got()}${hint}`;
      return [make(path, message, suggestion === undefined ? { expected } : { expected, suggestion })];
    }
    case "too_small":
    case "too_big": {
      const expected = describeBound(issue);
      return [make(path, `expected ${expected}, got ${got()}`, { expected })];
    }
    default:
      return [make(path, issue.message)];
  }
}

/** Readable names of zod's `expected` types. */
const TYPE_NAMES: Record<string, string> = {
  number: "a number",
  int: "an integer",
  string: "a string",
  boolean: "true or false",
  object: "a map",
  record: "a map",
  array: "a list",
  null: "null",
};

/** The expected range of a too_small/too_big issue, e.g. `a number >= 1`, `a non-empty string`. */
function describeBound(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === "too_small";
  const bound = Number(small ? issue.minimum : issue.maximum);
  const inclusive = issue.inclusive ?? true;
  switch (issue.origin) {
    case "string":
      return small && bound === 1
        ? "a non-empty string"
        : `a string of ${small ? "at least" : "at most"} ${bound} characters`;
    case "array":
      return `a list of ${small ? "at least" : "at most"} ${bound} item${bound === 1 ? "" : "s"}`;
    default:
      return `a number ${small ? ">" : "<"}${inclusive ? "=" : ""} ${bound}`;
  }
}

/** The value at `path` in the input, or undefined. */
function valueAt(input: PlainMap, path: readonly KeySegment[]): unknown {
  let node: unknown = input;
  for (const segment of path) node = childOf(node, segment);
  return node;
}

/** How a value appears in a message; secrets are never shown. */
function describeValue(
  value: unknown,
  key: KeySegment | undefined,
  env: Readonly<Record<string, string | undefined>>,
): string {
  if (typeof key === "string" && isSecretKey(key) && value !== null && value !== "") return "***";
  if (Array.isArray(value)) return "a list";
  if (isPlainMap(value)) return "a map";
  if (typeof value === "string") return redactText(JSON.stringify(value), env);
  return String(value);
}

/** Minimal view of a zod schema definition, for walking to the keys allowed at a path. */
interface SchemaDef {
  type: string;
  shape?: Record<string, { def: SchemaDef }>;
  innerType?: { def: SchemaDef };
  in?: { def: SchemaDef };
  element?: { def: SchemaDef };
  valueType?: { def: SchemaDef };
}

/** Strips wrappers (optional, default, pipe/transform, …) down to the underlying schema. */
function unwrap(def: SchemaDef): SchemaDef {
  let current = def;
  for (;;) {
    const inner = current.innerType ?? current.in;
    if (inner === undefined) return current;
    current = inner.def;
  }
}

/** The keys the schema allows in the map at `path`. */
function knownKeys(path: readonly KeySegment[]): string[] {
  let def: SchemaDef | undefined = unwrap((recipeSchema as unknown as { def: SchemaDef }).def);
  for (const segment of path) {
    if (def === undefined) return [];
    const next: { def: SchemaDef } | undefined =
      def.type === "object"
        ? def.shape?.[String(segment)]
        : def.type === "array"
          ? def.element
          : def.type === "record"
            ? def.valueType
            : undefined;
    def = next === undefined ? undefined : unwrap(next.def);
  }
  return def?.type === "object" ? Object.keys(def.shape ?? {}) : [];
}
