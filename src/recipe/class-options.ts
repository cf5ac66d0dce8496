/**
 * The recipe's options of a custom class (`rollout_worker.options`, `trainer.options`), checked
 * by the class's static `optionsSchema` (a Standard Schema) when it declares one.
 * @module
 */
import type { ClassOptions, OptionsIssue, OptionsSchema } from "../contracts/options.js";
import { RecipeError } from "../errors.js";

/** The recipe key of an issue at `path` under `root`, e.g. `trainer.options.bonus` or `….items[2]`. */
function keyPathOf(root: string, path: OptionsIssue["path"]): string {
  let key = root;
  for (const segment of path ?? []) {
    const name = typeof segment === "object" ? segment.key : segment;
    key += typeof name === "number" ? `[${name}]` : `.${String(name)}`;
  }
  return key;
}

function isOptionsSchema(value: unknown): value is OptionsSchema {
  const standard = (value as { "~standard"?: { validate?: unknown } } | null)?.["~standard"];
  return typeof standard?.validate === "function";
}

/**
 * The options `cls` is constructed with: `raw` (the recipe's value at `keyPath`, `{}` when absent)
 * checked and transformed by `cls.optionsSchema` when the class declares one.
 * @throws RecipeError naming each issue under its recipe key, when the schema refuses the options,
 * its output is not an object, or `optionsSchema` is not a Standard Schema.
 */
export async function classOptions(
  cls: { readonly name: string; readonly optionsSchema?: unknown },
  raw: ClassOptions | undefined,
  keyPath: string,
  recipeFile?: string,
): Promise<ClassOptions> {
  const given = raw ?? {};
  const schema = cls.optionsSchema;
  const fail = (issues: Array<{ keyPath: string; message: string }>): RecipeError =>
    RecipeError.fromIssues(issues, recipeFile === undefined ? {} : { file: recipeFile });
  if (schema === undefined) return given;
  if (!isOptionsSchema(schema))
    throw fail([
      {
        keyPath,
        message: `${cls.name}.optionsSchema is not a Standard Schema (zod ≥ 3.24, valibot ≥ 1 and ArkType ≥ 2 schemas are): declare one there, or remove it to take the options as written`,
      },
    ]);
  const result = await schema["~standard"].validate(given);
  if (result.issues !== undefined)
    throw fail(
      result.issues.map((issue) => ({
        keyPath: keyPathOf(keyPath, issue.path),
        message: `${issue.message} (checked by ${cls.name}.optionsSchema)`,
      })),
    );
  const value: unknown = result.value;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw fail([
      {
        keyPath,
        message: `${cls.name}.optionsSchema gave ${Array.isArray(value) ? "an array" : String(value)}, not an object of options: make the schema an object schema`,
      },
    ]);
  return value as ClassOptions;
}
