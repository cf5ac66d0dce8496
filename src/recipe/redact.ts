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

/**
 * Secrets shorter than this are not redacted inside other strings: no real API key is that short,
 * and replacing, say, every "e" of a message would make it unreadable. A run warns about such a
 * key instead ({@link shortSecretWarnings}).
 */
export const MIN_SECRET_LENGTH = 8;

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

/** The password of a URL with credentials (`scheme://user:password@host`): group 2. */
const URL_PASSWORD = /(\b[a-z][a-z\d+.-]*:\/\/[^\s/:@]*:)([^\s/@]+)(@)/gi;

/** `text` with the password of every URL in it (`redis://:pw@host`) replaced by `***`, whatever its length. */
export function redactUrlPasswords(text: string): string {
  return text.replace(URL_PASSWORD, `$1${REDACTED}$3`);
}

/** Replaces every occurrence of each of `secrets` in `text`, and every URL password, by `***`. */
function replaceSecrets(text: string, secrets: readonly string[]): string {
  return redactUrlPasswords(secrets.reduce((out, secret) => out.split(secret).join(REDACTED), text));
}

/** String values under secret-looking keys of `config`, at any depth, with their key paths. */
function secretSettings(config: unknown): Array<{ key: string; value: string }> {
  const found: Array<{ key: string; value: string }> = [];
  const visit = (value: unknown, path: string, secretKey: boolean): void => {
    if (secretKey && typeof value === "string" && value !== "") found.push({ key: path, value });
    else if (Array.isArray(value)) value.forEach((item, i) => visit(item, `${path}.${i}`, false));
    else if (isPlainMap(value))
      for (const [key, child] of Object.entries(value)) visit(child, path ? `${path}.${key}` : key, isSecretKey(key));
  };
  visit(config, "", false);
  return found;
}

/** The passwords of the URLs with credentials among the strings of `config`, as written and decoded. */
function urlPasswords(config: unknown): string[] {
  const found: string[] = [];
  const visit = (value: unknown): void => {
    if (typeof value === "string")
      for (const match of value.matchAll(URL_PASSWORD)) {
        found.push(match[2]!);
        try {
          found.push(decodeURIComponent(match[2]!));
        } catch {
          // Not percent-encoded text: the password as written is enough.
        }
      }
    else if (Array.isArray(value)) value.forEach(visit);
    else if (isPlainMap(value)) Object.values(value).forEach(visit);
  };
  visit(config);
  return found;
}

/**
 * A function that replaces by `***`, inside any text, every secret a run knows: the values of
 * secret-looking environment variables and of secret-looking recipe keys (`api_key`, …), each
 * at least {@link MIN_SECRET_LENGTH} characters long.
 */
export function secretRedactor(
  config: unknown,
  env: Readonly<Record<string, string | undefined>> = process.env,
): (text: string) => string {
  const fromConfig = [...secretSettings(config).map((s) => s.value), ...urlPasswords(config)].filter(
    (value) => value.length >= MIN_SECRET_LENGTH,
  );
  const secrets = [...new Set([...secretValues(env), ...fromConfig])].sort((a, b) => b.length - a.length);
  return (text) => replaceSecrets(text, secrets);
}

/** A deep copy of plain data with `redact` applied to every string in it (keys included). */
export function redactValue<T>(value: T, redact: (text: string) => string): T {
  const visit = (item: unknown): unknown => {
    if (typeof item === "string") return redact(item);
    if (Array.isArray(item)) return item.map(visit);
    if (isPlainMap(item)) return Object.fromEntries(Object.entries(item).map(([k, v]) => [redact(k), visit(v)]));
    return item;
  };
  return visit(value) as T;
}

/**
 * Warnings for secrets too short to be real keys (shorter than {@link MIN_SECRET_LENGTH}): the
 * values of secret-looking recipe keys, and of the environment variables named in `envNames`
 * (the services' fallbacks, such as `TINKER_API_KEY`). Such a value is not redacted, so that it
 * does not mangle every message it happens to occur in.
 */
export function shortSecretWarnings(
  config: unknown,
  env: Readonly<Record<string, string | undefined>>,
  envNames: readonly string[] = [],
): string[] {
  const short = [
    ...secretSettings(config).map((s) => ({ what: s.key, value: s.value })),
    ...envNames.flatMap((name) => (env[name] ? [{ what: `the environment variable ${name}`, value: env[name] }] : [])),
  ].filter((s) => s.value.length < MIN_SECRET_LENGTH);
  const seen = new Set<string>();
  return short.flatMap(({ what }) => {
    if (seen.has(what)) return [];
    seen.add(what);
    return [
      `${what} is shorter than ${MIN_SECRET_LENGTH} characters: it does not look like a real API key (check its value); it is not redacted from output, since hiding so short a string would garble messages`,
    ];
  });
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
