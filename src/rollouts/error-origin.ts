/**
 * Where a rollout's error came from, for messages that help: the frames of the user's own code in
 * its stack, and whether trying the rollout again could help (a timeout, the network, sampling)
 * or not (a bug in the worker, which would fail the same way).
 * @module
 */
import { fileURLToPath } from "node:url";
import { UserCodeError } from "../errors.js";

/** The folders of nexrl's own code: frames in them are not the user's. */
const NEXRL_FOLDERS = ["src", "dist"].map((folder) => fileURLToPath(new URL(`../../${folder}/`, import.meta.url)));

/** `    at fn (file:line:col)` or `    at file:line:col`. */
const FRAME = /^\s*at (?:(.+?) \()?(.+?):(\d+):(\d+)\)?$/;

/**
 * The frames of `error`'s stack in the user's code (not in Node, `node_modules` or nexrl), each
 * as `file:line:column` followed by the function in parentheses when the stack names one.
 */
export function userFrames(error: unknown): string[] {
  if (!(error instanceof Error) || error.stack === undefined) return [];
  const frames: string[] = [];
  for (const line of error.stack.split("\n")) {
    const match = FRAME.exec(line);
    if (!match) continue;
    const [, fn, location, row, column] = match;
    let file = location!;
    if (file.startsWith("file://")) file = fileURLToPath(file);
    if (file.startsWith("node:") || file.includes("/node_modules/") || !file.startsWith("/")) continue;
    if (NEXRL_FOLDERS.some((folder) => file.startsWith(folder))) continue;
    frames.push(`${file}:${row}:${column}${fn === undefined ? "" : ` (${fn})`}`);
  }
  return frames;
}

/** Errors the rollout's inference client raised: sampling failed, not the worker's own code. */
const samplingErrors = new WeakSet<object>();

/** Marks `error` as raised by sampling (see {@link retryCouldHelp}). */
export function markSamplingError(error: unknown): void {
  if (typeof error === "object" && error !== null) samplingErrors.add(error);
}

/** Error codes of Node and undici for a network that failed. */
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
]);

/** Error names of timeouts (`AbortSignal.timeout`) and of the openai package's connection failures. */
const RETRYABLE_NAMES = new Set(["TimeoutError", "APIConnectionError", "APIConnectionTimeoutError"]);

/** A rollout that took too long or could never finish (a hang may be a slow service as well as a bug). */
const isTimeout = (e: object): boolean => e instanceof UserCodeError && (e.code === "timeout" || e.code === "hung");

/** The status codes a request may succeed on when sent again. */
const RETRYABLE_STATUS = (status: number): boolean => status === 408 || status === 429 || status >= 500;

/**
 * Whether trying a failed rollout again could succeed: a timeout, a sampling failure, a network
 * error or a retryable HTTP status anywhere in its cause chain. An error of the worker's own code
 * (a `TypeError`, an invalid trajectory) would fail the same way again.
 */
export function retryCouldHelp(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === "object" && e !== null && depth < 8; depth++) {
    if (isTimeout(e) || samplingErrors.has(e)) return true;
    const fields = e as { isRetryable?: unknown; status?: unknown; code?: unknown; name?: unknown; cause?: unknown };
    // nexrl's HTTP errors know (a service may say a 5xx is final).
    if (typeof fields.isRetryable === "boolean") return fields.isRetryable;
    if (typeof fields.name === "string" && RETRYABLE_NAMES.has(fields.name)) return true;
    if (typeof fields.status === "number" && RETRYABLE_STATUS(fields.status)) return true;
    if (typeof fields.code === "string" && (NETWORK_CODES.has(fields.code) || fields.code.startsWith("UND_ERR_")))
      return true;
    e = fields.cause;
  }
  return false;
}
