import { InputError } from "../errors.js";
/**
 * Reading ids out of request paths. A path segment is percent-decoded (`%2F` → `/`); a segment
 * that is not valid percent-encoding (`%E0%A4%A`) is the client's mistake, answered with 400 by
 * every route of `nexrl serve` and the agent gateway rather than a retryable 500.
 *
 * @module
 */

/**
 * `segment` percent-decoded.
 * @param segment the raw segment, as it appears in the request URL.
 * @param what what the segment names (`model id`, `rollout id`), for the message.
 * @throws {@link "nexrl".InputError | InputError} when it is not valid percent-encoding.
 */
export function decodePathSegment(segment: string, what: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new InputError(
      `the ${what} in the URL path, "${segment.slice(0, 200)}", is not valid percent-encoding; encode ids with encodeURIComponent`,
    );
  }
}
