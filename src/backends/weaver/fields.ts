import { UnexpectedResponseError } from "../../errors.js";
/**
 * Reading Weaver answers whose field names may come in snake_case, camelCase or PascalCase.
 *
 * @module
 */

const normal = (name: string): string => name.replace(/[_-]/g, "").toLowerCase();

/** The object `value`, or an {@link UnexpectedResponseError} naming `what`. */
export function object(value: unknown, what: string): Record<string, unknown> {
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new UnexpectedResponseError(
      `${what}: expected a JSON object from the Weaver service, got ${JSON.stringify(value)?.slice(0, 200)}`,
    );
  }
  return value as Record<string, unknown>;
}

/** The field `name` of `value` in any casing (`model_path`, `modelPath`, `ModelPath`, …); undefined when absent. */
export function field(value: unknown, name: string): unknown {
  if (!value || typeof value !== "object") return undefined;
  const record = value as Record<string, unknown>;
  if (name in record) return record[name];
  const wanted = normal(name);
  const key = Object.keys(record).find((k) => normal(k) === wanted);
  return key === undefined ? undefined : record[key];
}

/** The string field `name`, or an {@link UnexpectedResponseError}. */
export function stringField(value: unknown, name: string, what: string): string {
  const found = field(value, name);
  if (typeof found !== "string")
    throw new UnexpectedResponseError(`${what}: the Weaver answer has no string field ${name}`);
  return found;
}

/** The numbers of `value` — a list, or a tensor `{data: [...]}` — or an {@link UnexpectedResponseError}. */
export function numberList(value: unknown, what: string): number[] {
  const list = field(value, "data") ?? value;
  if (!Array.isArray(list) || !list.every((v) => typeof v === "number"))
    throw new UnexpectedResponseError(`${what}: expected a list of numbers from the Weaver service`);
  return list as number[];
}
