/**
 * The messages of the tasks and results streams: JSON in one `body` field, with numbers JSON
 * cannot hold (NaN, ±Infinity, which logprobs and rewards may be) kept as tagged strings.
 * @module
 */
import type { RolloutTask } from "../../contracts/task.js";
import type { TrajectoryInit } from "../../contracts/trajectory.js";
import { NexrlError, UserCodeError, type UserCodeProblem } from "../../errors.js";

/** Which of the driver's runners a task belongs to: it names the worker instances (`rollout_worker-N`, `validation_worker-N`). */
export type TaskKind = "train" | "validation";

/** Where a task's rollout samples: the driver's inference relay. */
export interface InferenceTarget {
  /** Base URL of the relay, `http://host:port`. */
  url: string;
  /** Bearer token of the relay, random per driver session. */
  token: string;
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
  /** The task, as the driver's loader made it. */
  task: RolloutTask;
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

const NUMBER_TAG = "\u0000number:";
/** How {@link NUMBER_TAG} reads inside JSON text (`JSON.stringify` escapes the NUL). */
const NUMBER_TAG_IN_JSON = JSON.stringify(NUMBER_TAG).slice(1, -1);

function tagNonFinite(_key: string, item: unknown): unknown {
  return typeof item === "number" && !Number.isFinite(item) ? `${NUMBER_TAG}${item}` : item;
}

function untagNonFinite(_key: string, item: unknown): unknown {
  return typeof item === "string" && item.startsWith(NUMBER_TAG) ? Number(item.slice(NUMBER_TAG.length)) : item;
}

/**
 * Whether `value` holds no number JSON cannot write. A replacer costs a call per value written
 * (and a key string per array item), several times this walk; objects with their own `toJSON`
 * are left to the replacer.
 */
function allFinite(value: unknown): boolean {
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value !== "object" || value === null) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!allFinite(value[i])) return false;
    return true;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
  for (const key in value) if (!allFinite((value as Record<string, unknown>)[key])) return false;
  return true;
}

/** JSON text of `value`, non-finite numbers included. */
export function encode(value: unknown): string {
  return allFinite(value) ? JSON.stringify(value) : JSON.stringify(value, tagNonFinite);
}

/** A value back from {@link encode}'s text (the caller knows its type). */
export function decode<T>(text: string): T {
  // Text without a tag needs no reviver (which costs a call per value read).
  return (text.includes(NUMBER_TAG_IN_JSON) ? JSON.parse(text, untagNonFinite) : JSON.parse(text)) as T;
}

/** A failed attempt that came back from a worker, for the driver's failure policy. */
export class RemoteRolloutError extends NexrlError {
  /** Whether a retry could help (read by the failure policy's messages). */
  readonly isRetryable: boolean;

  /** @param failure what the worker reported. @param worker its name. */
  constructor(failure: RemoteFailure, worker: string) {
    super(`${failure.name}: ${failure.message} (on nexrl worker ${worker})`);
    this.isRetryable = failure.retryable;
  }
}

/** The driver's error for a failure a worker reported: timeouts and hangs stay `UserCodeError`s, so they count as such. */
export function failureError(failure: RemoteFailure, worker: string): Error {
  if (failure.problem !== undefined)
    return new UserCodeError(failure.problem, `${failure.message} (on nexrl worker ${worker})`);
  return new RemoteRolloutError(failure, worker);
}
