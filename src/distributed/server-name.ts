/**
 * How messages name the Redis server of a distributed run.
 * @module
 */
import { redactUrlPasswords } from "../recipe/redact.js";

/** The server of `url` as messages name it: `host:port`, never the password. */
export function serverName(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || "6379"}`;
  } catch {
    return redactUrlPasswords(url);
  }
}
