/**
 * Why a network request failed, in a few words.
 *
 * @module
 */

/** The innermost cause of a failed `fetch` (`ECONNREFUSED`, `ENOTFOUND`, …), else its message. */
export function networkReason(error: unknown): string {
  let current = error as { message?: string; code?: string; cause?: unknown } | undefined;
  while (current?.cause) current = current.cause as typeof current;
  return current?.code ?? current?.message ?? String(error);
}
