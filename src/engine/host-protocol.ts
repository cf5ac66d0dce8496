/**
 * What an {@link "./engine-host.js".HostedEngine} and its engine host thread say to each other,
 * and how an error crosses between them: as the same error class, with the same message and
 * fields.
 *
 * @module
 * @internal
 */
import type { ComputeOptions } from "./runtime.js";
import type { LocalEngineOptions } from "./engine.js";
import * as errors from "../errors.js";

/** What the host builds when it starts. */
export type HostSubject =
  { kind: "engine"; options: LocalEngineOptions } | { kind: "snapshot"; path: string; compute: ComputeOptions };

/** The calls a host answers (methods of its engine, or of its snapshot sampler). */
export type HostMethod =
  | "forward"
  | "forwardBackward"
  | "optimStep"
  | "sampleAsync"
  | "computeLogprobs"
  | "saveState"
  | "loadState"
  | "saveWeightsForSampler"
  | "close";

/** A call posted to the host; call 0 builds its subject. */
export type HostRequest = { id: 0; subject: HostSubject } | { id: number; method: HostMethod; args: unknown[] };

/** An error as it crosses threads. */
export interface EncodedError {
  /** The class's name (`EngineError`, `InputError`, `TypeError`, …). */
  name: string;
  message: string;
  stack: string | undefined;
  /** The error's own enumerable fields (`problem`, `path`, …). */
  fields: Record<string, unknown>;
}

/** The host's answer to call `id`; to call 0, the resolved model config. */
export type HostReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: EncodedError };

/** The error classes that cross as themselves: nexrl's and JavaScript's own. */
const ERROR_CLASSES: ReadonlyMap<string, ErrorConstructor> = new Map(
  [...Object.values(errors), Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError].flatMap(
    (value) =>
      typeof value === "function" && (value === Error || value.prototype instanceof Error)
        ? [[value.name, value as ErrorConstructor] as const]
        : [],
  ),
);

/** `error` as the host posts it. */
export function encodeError(error: unknown): EncodedError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error), stack: undefined, fields: {} };
  return { name: error.constructor.name, message: error.message, stack: error.stack, fields: { ...error } };
}

/**
 * The error `encoded` describes, as an instance of the class of that name (the class's
 * constructor does not run: the fields are those of the original), or a plain `Error` for a
 * class not known here.
 */
export function decodeError(encoded: EncodedError): Error {
  const known = ERROR_CLASSES.get(encoded.name);
  // A real error (so that it is a native error to `util.types`), given the class's prototype.
  const error = Object.setPrototypeOf(new Error(encoded.message), (known ?? Error).prototype as object) as Error;
  Object.defineProperty(error, "stack", { value: encoded.stack, writable: true, configurable: true });
  Object.assign(error, encoded.fields);
  if (!known) error.name = encoded.name;
  return error;
}
