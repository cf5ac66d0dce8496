/**
 * The messages of the tasks and results streams: JSON in one `body` field, with numbers JSON
 * cannot hold (NaN, ±Infinity, which logprobs and rewards may be) kept as tagged strings, and
 * the zod schemas every message read is checked against.
 * @module
 */
import { z } from "zod";
import { isTaskPrompt, type RolloutTask } from "../contracts/task.js";
import type { TrajectoryInit } from "../contracts/trajectory.js";
import { RemoteRolloutError, UserCodeError, type UserCodeProblem } from "../errors.js";

/** Which of the driver's runners a task belongs to: it names the worker instances (`rollout_worker-N`, `validation_worker-N`). */
export type TaskKind = "train" | "validation";

/** Where a task's rollout samples: the driver's inference relay. */
export interface InferenceTarget {
  /** Base URL of the relay, `http://host:port`. */
  url: string;
  /** Bearer token of the relay, random per driver session. */
  token: string;
}

/** The driver's sampling settings, which a worker's rollouts use instead of its own recipe's. */
export interface TaskSampling {
  /** `rollout_worker.temperature`. */
  temperature: number;
  /** `rollout_worker.max_response_length`. */
  max_response_length: number;
}

/** One rollout attempt for a worker. */
export interface TaskMessage {
  /** Unique per attempt and driver session: what results are matched (and deduplicated) by. */
  id: string;
  /** The driver session that sent it. */
  session: string;
  /** The stream the result goes to. */
  results: string;
  /** Which runner of the driver. */
  kind: TaskKind;
  /** The attempt number: with the task's seed it determines the sampling seeds. */
  attempt: number;
  /** Policy version stamped on trajectories that sampled nothing. */
  version: number;
  /** Where to sample, when the rollout may. */
  inference?: InferenceTarget;
  /** How to sample. */
  sampling: TaskSampling;
  /** The task, as the driver's loader made it. */
  task: RolloutTask;
}

/** A module the rollout worker is loaded from, in a {@link RunFingerprint}. */
export interface FingerprintModule {
  /** SHA-256 of the file's content, hex. */
  sha256: string;
  /** The export taken from it (a custom worker's class, an agent's or evaluator's export), if any. */
  export?: string;
}

/**
 * What a worker's own recipe must share with the driver's for its rollouts to be the driver's:
 * the driver publishes it per session. Sampling settings are not in it: every task carries them.
 */
export interface RunFingerprint {
  /** The nexrl version. */
  nexrl: string;
  /** `service.train_service.model`. */
  model: string;
  /** The tokenizer rollouts tokenize with. */
  tokenizer: string;
  /** `rollout_worker.type`. */
  worker_type: string;
  /** The files the worker (and its agent, evaluator) is loaded from, by recipe key. */
  modules: Record<string, FingerprintModule>;
  /** SHA-256 (hex) of `rollout_worker.options` as JSON with sorted keys; absent when the recipe gives none. */
  worker_options?: string;
}

/** A failed attempt, as a worker reports it. */
export interface RemoteFailure {
  /** The error's class name. */
  name: string;
  /** Its message (user code frames appended). */
  message: string;
  /** A `UserCodeError`'s problem (`timeout`, `hung`, `uncaught`, …). */
  problem?: UserCodeProblem;
  /** Whether a retry could help. */
  retryable: boolean;
}

/** The result of one attempt. */
export type ResultMessage = {
  /** The task message's id. */
  id: string;
  /** The worker that ran it. */
  worker: string;
  /** Times the task was delivered (more than 1 when it was claimed from a dead or stopped worker). */
  deliveries: number;
} & ({ ok: true; trajectories: TrajectoryInit[]; unknownTokenIds: number } | { ok: false; error: RemoteFailure });

/**
 * Non-finite numbers travel as strings that start with NUL: `"\u0000number:NaN"`. A string of
 * the data that starts with NUL itself travels as `"\u0000string:"` and the string, so no string
 * can read back as a number (or as anything but itself).
 */
const TAG_START = "\u0000";
const NUMBER_TAG = `${TAG_START}number:`;
const STRING_TAG = `${TAG_START}string:`;
/** How {@link TAG_START} reads inside JSON text (`JSON.stringify` escapes the NUL). */
const TAG_START_IN_JSON = JSON.stringify(TAG_START).slice(1, -1);

function tag(_key: string, item: unknown): unknown {
  if (typeof item === "number") return Number.isFinite(item) ? item : `${NUMBER_TAG}${item}`;
  return typeof item === "string" && item.startsWith(TAG_START) ? `${STRING_TAG}${item}` : item;
}

function untag(_key: string, item: unknown): unknown {
  if (typeof item !== "string" || !item.startsWith(TAG_START)) return item;
  if (item.startsWith(NUMBER_TAG)) return Number(item.slice(NUMBER_TAG.length));
  return item.startsWith(STRING_TAG) ? item.slice(STRING_TAG.length) : item;
}

/**
 * Whether `value` holds nothing to tag: no number JSON cannot write, no string that starts with
 * NUL. A replacer costs a call per value written (and a key string per array item), several
 * times this walk; objects with their own `toJSON` are left to the replacer.
 */
function untagged(value: unknown): boolean {
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value === "string") return value.charCodeAt(0) !== 0;
  if (typeof value !== "object" || value === null) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!untagged(value[i])) return false;
    return true;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
  for (const key in value) if (!untagged((value as Record<string, unknown>)[key])) return false;
  return true;
}

/** JSON text of `value`, non-finite numbers included. */
export function encode(value: unknown): string {
  return untagged(value) ? JSON.stringify(value) : JSON.stringify(value, tag);
}

/** A value back from {@link encode}'s text (the caller knows its type, or checks it). */
export function decode<T>(text: string): T {
  // Text without a tag needs no reviver (which costs a call per value read).
  return (text.includes(TAG_START_IN_JSON) ? JSON.parse(text, untag) : JSON.parse(text)) as T;
}

const count = z.number().int().nonnegative();

/** What a task message must be (keys it does not know are dropped); its task's own fields beyond these travel as they are. */
const taskMessageSchema = z.object({
  id: z.string().min(1),
  session: z.string().min(1),
  results: z.string().min(1),
  kind: z.enum(["train", "validation"]),
  attempt: count,
  version: count,
  inference: z.object({ url: z.string().min(1), token: z.string() }).optional(),
  sampling: z.object({ temperature: z.number().min(0), max_response_length: z.number().int().positive() }),
  task: z.looseObject({
    data: z.record(z.string(), z.unknown()),
    prompt: z.custom<RolloutTask["prompt"]>(isTaskPrompt, "expected text or chat messages"),
    index: count,
    epoch: count,
    batchIndex: count,
    groupId: z.string(),
    runId: count,
    groupSize: z.number().int().positive(),
    isVal: z.boolean(),
    seed: z.number(),
  }),
});

const remoteFailureSchema = z.object({
  name: z.string(),
  message: z.string(),
  problem: z.enum(["uncaught", "timeout", "hung", "agent_result"]).optional(),
  retryable: z.boolean(),
});

/** What a result message must be; its trajectories are checked by the runner, as every rollout's are. */
const resultMessageSchema = z.discriminatedUnion("ok", [
  z.object({
    id: z.string().min(1),
    worker: z.string(),
    deliveries: z.number().int().positive(),
    ok: z.literal(true),
    trajectories: z.array(z.looseObject({})),
    unknownTokenIds: count,
  }),
  z.object({
    id: z.string().min(1),
    worker: z.string(),
    deliveries: z.number().int().positive(),
    ok: z.literal(false),
    error: remoteFailureSchema,
  }),
]);

/** What a published {@link RunFingerprint} must be (keys a later nexrl may add are dropped). */
const fingerprintSchema = z.object({
  nexrl: z.string(),
  model: z.string(),
  tokenizer: z.string(),
  worker_type: z.string(),
  modules: z.record(z.string(), z.object({ sha256: z.string(), export: z.string().optional() })),
  worker_options: z.string().optional(),
});

/** A message read from a stream: its value, or what is wrong with it. */
export type Read<T> = { ok: true; value: T } | { ok: false; problem: string };

/** The message of a stream entry's `body` field (`undefined`: the entry has none), checked against `schema`. */
function read<T>(schema: z.ZodType<T>, body: unknown): Read<T> {
  if (typeof body !== "string") return { ok: false, problem: "the entry has no body field" };
  let value: unknown;
  try {
    value = decode(body);
  } catch {
    return { ok: false, problem: "its body is not JSON" };
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  const at = issue && issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
  return { ok: false, problem: `${at}${issue?.message ?? "not a message"}` };
}

/** The {@link TaskMessage} of a tasks stream entry's `body`, or what is wrong with it. */
export function readTask(body: unknown): Read<TaskMessage> {
  return read(taskMessageSchema as z.ZodType<TaskMessage>, body);
}

/** The {@link ResultMessage} of a results stream entry's `body`, or what is wrong with it. */
export function readResult(body: unknown): Read<ResultMessage> {
  return read(resultMessageSchema as z.ZodType<ResultMessage>, body);
}

/** The {@link RunFingerprint} of a fingerprint key's value, or what is wrong with it. */
export function readFingerprint(body: unknown): Read<RunFingerprint> {
  return read(fingerprintSchema as z.ZodType<RunFingerprint>, body);
}

/** The driver's error for a failure a worker reported: timeouts and hangs stay `UserCodeError`s, so they count as such. */
export function failureError(failure: RemoteFailure, worker: string): Error {
  if (failure.problem !== undefined)
    return new UserCodeError(`${failure.message} (on nexrl worker ${worker})`, { code: failure.problem });
  return new RemoteRolloutError(`${failure.name}: ${failure.message} (on nexrl worker ${worker})`, {
    isRetryable: failure.retryable,
  });
}
