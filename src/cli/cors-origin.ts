/**
 * The value of a `--cors` option (`nexrl serve`, `nexrl report --watch`).
 * @module
 */
import { UsageError } from "../errors.js";

/**
 * A `--cors` value: `*`, or an origin (`scheme://host[:port]`, nothing after).
 * @throws {@link UsageError} for anything else.
 */
export function corsOrigin(value: string): string {
  if (value === "*") return value;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || url.origin === "null" || url.origin !== value.replace(/\/+$/, ""))
    throw new UsageError(
      `--cors takes an origin such as http://localhost:3000 (scheme, host and port only) or *, got "${value}"`,
    );
  return url.origin;
}
