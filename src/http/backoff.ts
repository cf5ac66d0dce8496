/**
 * Waiting between retries: jittered exponential backoff, the service's `retry-after-ms` /
 * `retry-after` headers, and an abortable sleep.
 *
 * @module
 */
import { setTimeout as delay } from "node:timers/promises";

/** How long to wait between retries. */
export interface BackoffOptions {
  /** Delay before the first retry, in milliseconds (default 500). */
  initialDelayMs: number;
  /** Longest delay, in milliseconds (default 10 000). */
  maxDelayMs: number;
}

/** Default {@link BackoffOptions}: 0.5 s doubling up to 10 s. */
export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = Object.freeze({ initialDelayMs: 500, maxDelayMs: 10_000 });

/**
 * The delay before retry number `attempt` (1-based): `initialDelayMs · 2^(attempt−1)` capped at
 * `maxDelayMs`, scaled by a random factor in [0.5, 1] so that many clients do not retry in step.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  const base = Math.min(options.initialDelayMs * 2 ** Math.max(0, attempt - 1), options.maxDelayMs);
  return base * (0.5 + 0.5 * random());
}

/**
 * The delay a response asks for: `retry-after-ms` (milliseconds), else `retry-after` in seconds
 * or as an HTTP date. Undefined when neither is present or readable.
 */
export function retryAfterMs(
  headers: Readonly<Record<string, string | undefined>>,
  now: number = Date.now(),
): number | undefined {
  const ms = Number.parseFloat(headers["retry-after-ms"] ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers["retry-after"];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (value.trim() !== "" && Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
}

/**
 * Waits `ms` milliseconds; rejects when `signal` aborts. The timer keeps the process alive: a
 * caller awaits the retry it precedes (close the client, or abort, to stop waiting).
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(ms, undefined, signal && { signal });
}
