/**
 * The unit of work handed to rollout workers.
 * @module
 */
import type { ChatMessage } from "../wire/tokenizer.js";

/** One task row: the fields of a data file's record. */
export type DataRow = Record<string, unknown>;

/** Whether `m` is an assistant message that only calls tools: content null or absent, as OpenAI writes it. */
function onlyCallsTools(m: object): boolean {
  const { content, tool_calls: calls } = m as { content?: unknown; tool_calls?: unknown };
  return (content === null || content === undefined) && Array.isArray(calls) && calls.length > 0;
}

/**
 * Whether `value` can be a task's prompt: text, or a list of `{role, content}` chat messages
 * with text content (an assistant message that only calls tools may have content null, as in
 * OpenAI's format). The data loader refuses rows whose prompt field is anything else.
 */
export function isTaskPrompt(value: unknown): value is string | readonly ChatMessage[] {
  return (
    typeof value === "string" ||
    (Array.isArray(value) &&
      value.every(
        (m: unknown) =>
          typeof m === "object" &&
          m !== null &&
          typeof (m as ChatMessage).role === "string" &&
          (typeof (m as ChatMessage).content === "string" || onlyCallsTools(m)),
      ))
  );
}

/**
 * A prompt field {@link isTaskPrompt} accepted, as a task's prompt: the same value, except that
 * messages that only call tools get content `""` (in a copy of the list).
 */
export function taskPrompt(value: unknown): string | readonly ChatMessage[] {
  if (typeof value === "string") return value;
  const messages = value as ChatMessage[];
  if (messages.every((m) => typeof m.content === "string")) return messages;
  return messages.map((m) => (typeof m.content === "string" ? m : { ...m, content: "" }));
}

/**
 * One rollout to run: a data row, which copy of it this is, and its sampling seed. `Row` is the
 * shape of the data file's rows, for workers that declare it (`BaseRolloutWorker<MyRow>`); the
 * pipeline does not check it, so declare only fields every row has.
 */
export interface RolloutTask<Row extends object = DataRow> {
  /** The row's fields, as read from the data file. */
  readonly data: Readonly<Row>;
  /** The row's prompt field (`data.prompt_key`): text, or chat messages (the loader checks which). */
  readonly prompt: string | readonly ChatMessage[];
  /** Row index within the dataset (files concatenated in the order given). */
  readonly index: number;
  /** Pass over the data this task belongs to (0 for the first). */
  readonly epoch: number;
  /** Loader batch the task was handed out in (the training step it is meant for, minus one). */
  readonly batchIndex: number;
  /** Shared by the `rollout_repeat_n` copies of a row; groups trajectories for GRPO. */
  readonly groupId: string;
  /** Index of this copy within its group, 0 … groupSize − 1. */
  readonly runId: number;
  /** Copies of the row in the group (`rollout_repeat_n`). */
  readonly groupSize: number;
  /** True for validation tasks, which are scored but never trained on. */
  readonly isVal: boolean;
  /** Sampling seed of this rollout, derived from the run seed, the batch, the row and the copy. */
  readonly seed: number;
}

/** The copies of one row, run and trained together. */
export interface TaskGroup {
  /** The group id of every task in it. */
  readonly groupId: string;
  /** Row index within the dataset. */
  readonly index: number;
  /** Pass over the data. */
  readonly epoch: number;
  /** Loader batch it was handed out in. */
  readonly batchIndex: number;
  /** One task per copy, in `runId` order. */
  readonly tasks: readonly RolloutTask[];
}

/**
 * The row number messages use for `task`: 1-based, counting rows across `data.data_files` in the
 * order given (`task.index` is 0-based).
 */
export function rowNumber(task: Pick<RolloutTask, "index">): number {
  return task.index + 1;
}

/** How messages name a rollout: `row 4 (group 0-3, run 1)`, the row counted from 1. */
export function describeTask(task: Pick<RolloutTask, "index" | "groupId" | "runId">): string {
  return `row ${rowNumber(task)} (group ${task.groupId}, run ${task.runId})`;
}
