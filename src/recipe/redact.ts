/**
 * Secret redaction for printing resolved recipes and error messages.
 * @module
 */
import { isPlainMap } from "./tree.js";

/** What a redacted value is replaced by. */
export const REDACTED = "***";

/** Key names whose values are secrets: `api_key`, `tinker_api_key`, `token`, `client_secret`, `password`, … */
const SECRET_KEY =
  /(?:^|[_-])(?:api[_-]?key|token|access[_-]?key|private[_-]?key|authorization|credentials?)$|secret|passw(?:or)?d/i;

/** Environment variable names whose values are secrets: `*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`. */
const SECRET_ENV = /(?:^|_)(?:API_KEY|TOKEN)$|SECRET|PASSWORD/i;

/** Environment values shorter than this are not redacted inside other strings (too likely to match by chance). */
const MIN_SECRET_LENGTH = 8;

/** True when a recipe key name looks like it holds a secret. */
export function isSecretKey(name: string): boolean {
  return SECRET_KEY.test(name);
}

/** Values of secret-looking environment variables, longest first. */
function secretValues(env: Readonly<Record<string, string | undefined>>): string[] {
  const values = Object.entries(env)
    .filter(([name, value]) => SECRET_ENV.test(name) && value !== undefined && value.length >= MIN_SECRET_LENGTH)
    .map(([, value]) => value!);
  return [...new Set(values)].sort((a, b) => b.length - a.length);
}

/** Replaces every occurrence of each of `secrets` in `text` by `***`. */
function replaceSecrets(text: string, secrets: readonly string[]): string {
  return secrets.reduce((out, secret) => out.split(secret).join(REDACTED), text);
}

/** Replaces every occurrence of a secret environment value in `text` by `***`. */
export function redactText(text: string, env: Readonly<Record<string, string | undefined>> = process.env): string {
  return replaceSecrets(text, secretValues(env));
}

/**
 * A deep copy of `config` that is safe to print: non-empty values under secret-looking keys
 * (`api_key`, `*_api_key`, `token`, `secret`, `password`, `authorization`, …) become `"***"`, and
 * every occurrence, inside any string, of the value of a secret-looking environment variable
 * (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, at least 8 characters) becomes `***`.
 *
 * @example
 * ```ts
 * console.log(YAML.stringify(redactSecrets(recipe.config)));
 * ```
 */
export function redactSecrets<T>(config: T, env: Readonly<Record<string, string | undefined>> = process.env): T {
  const secrets = secretValues(env);
  const visit = (value: unknown, secretKey: boolean): unknown => {
    if (secretKey && value !== null && value !== undefined && value !== "") return REDACTED;
    if (typeof value === "string") return replaceSecrets(value, secrets);
    if (Array.isArray(value)) return value.map((item) => visit(item, false));
    if (isPlainMap(value)) {
      return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, visit(child, isSecretKey(key))]));
    }
    return value;
  };
  return visit(config, false) as T;
}
