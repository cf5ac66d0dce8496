/**
 * `failures.jsonl`: every failed rollout attempt of a run, and the first failure of each kind on
 * the console.
 * @module
 */
import { JsonlLog, type StepRow } from "./jsonl-log.js";
import { userFrames } from "../rollouts/error-origin.js";
import { shownValue, type FailureAction, type RolloutFailure } from "../rollouts/runner.js";
import { rowNumber } from "../contracts/task.js";
import { InputError, NexrlError, UserCodeError } from "../errors.js";

/** What went wrong in a failed attempt. */
export type FailureKind = "error" | "invalid_trajectory" | "timeout" | "hung" | "uncaught";

/** One line of `failures.jsonl`. */
export interface FailureRow extends StepRow {
  /** The training step the rollout was for (for validation rollouts: the step validated). */
  step: number;
  /** True for a validation rollout. */
  validation: boolean;
  /** The data row, counted from 1 across `data.data_files` in order. */
  row: number;
  /** Group id. */
  group: string;
  /** Copy of the row within its group. */
  run: number;
  /** Attempt number, 1 for the first. */
  attempt: number;
  /** What went wrong. */
  kind: FailureKind;
  /** The error's class name. */
  error: string;
  /** The error's message (secrets redacted). */
  message: string;
  /** The stack trace of an error raised by user code (secrets redacted). */
  stack?: string;
  /** Where in the user's code it was raised: the first frame of the stack outside nexrl, Node and `node_modules` (`file:line:column (function)`). */
  at?: string;
  /** What the failure policy did. */
  action: FailureAction;
}

function kindOf(error: unknown): FailureKind {
  if (error instanceof UserCodeError && error.code !== "agent_result") return error.code;
  if (error instanceof InputError && error.field !== undefined) return "invalid_trajectory";
  return "error";
}

/** The failure's cause as the user wrote it: an uncaught error's own error, else the error. */
function original(error: unknown): unknown {
  return error instanceof UserCodeError && error.code === "uncaught" && error.cause !== undefined ? error.cause : error;
}

/**
 * Records failed rollout attempts: each one a line of `failures.jsonl` (written in order, in the
 * background; {@link FailureLog.flush} waits for them), telling whether it is the first of its
 * kind (the same kind, error class and message up to its numbers and rollout ids) in this session.
 */
export class FailureLog {
  private readonly seen = new Set<string>();
  private writing: Promise<void> = Promise.resolve();
  private writeError: unknown;
  private total = 0;

  private constructor(
    private readonly log: JsonlLog<FailureRow>,
    private readonly redact: (text: string) => string,
  ) {}

  /**
   * Opens `path` like the other logs of a run (rows after `keepThroughStep` dropped on resume).
   * @param redact removes secrets from messages and stacks.
   * @param warn hears of each line a resume drops for being unreadable.
   */
  static async open(
    path: string,
    keepThroughStep: number | undefined,
    redact: (text: string) => string,
    warn?: (message: string) => void,
  ): Promise<FailureLog> {
    return new FailureLog(await JsonlLog.open<FailureRow>(path, keepThroughStep, warn), redact);
  }

  /** The file. */
  get path(): string {
    return this.log.path;
  }

  /** Failures recorded by this session. */
  get count(): number {
    return this.total;
  }

  /** Records `failure` of a rollout for training step `step`; `first`: the first of its kind. */
  record(failure: RolloutFailure, step: number): { row: FailureRow; first: boolean } {
    const { task } = failure;
    const error = original(failure.error);
    const kind = kindOf(failure.error);
    const message =
      failure.error instanceof Error && error !== failure.error
        ? failure.error.message
        : error instanceof Error
          ? error.message
          : shownValue(error);
    const at = userFrames(error)[0];
    const row: FailureRow = {
      step,
      validation: task.isVal,
      row: rowNumber(task),
      group: task.groupId,
      run: task.runId,
      attempt: failure.attempt,
      kind,
      error: error instanceof Error ? error.name : typeof error,
      message: this.redact(message),
      // The stack of an error nexrl raised (a timeout, an invalid trajectory) only shows nexrl's code.
      ...(error instanceof Error &&
        !(error instanceof NexrlError) &&
        error.stack !== undefined && { stack: this.redact(error.stack) }),
      ...(at !== undefined && { at: this.redact(at) }),
      action: failure.action,
    };
    this.total++;
    this.writing = this.writing.then(() => this.log.append(row)).catch((e: unknown) => void (this.writeError ??= e));
    // The agent gateway's rollout ids (`r-` and 22 random characters) differ in every rollout.
    const key = `${kind}|${row.error}|${row.message.replace(/\br-[\w-]{22}\b/g, "r-#").replace(/\d+/g, "#")}`;
    const first = !this.seen.has(key);
    this.seen.add(key);
    return { row, first };
  }

  /**
   * Waits for the lines recorded so far to be written.
   * @throws the file-system error of a write that failed.
   */
  async flush(): Promise<void> {
    await this.writing;
    if (this.writeError !== undefined) throw this.writeError;
  }
}

/** A failure as the console shows it: one line, with where it happened and what was done. */
export function formatFailure(row: FailureRow): string {
  const action = { retry: "retrying", skip: "skipped", stop: "the run stops", none: "it had already ended" }[
    row.action
  ];
  const where = `${row.validation ? "validation " : ""}rollout of row ${row.row} (group ${row.group}, run ${row.run}), attempt ${row.attempt}`;
  const firstLine = row.message.split("\n")[0];
  // The messages of timeouts, hangs and uncaught errors say what they are.
  const what = row.kind === "error" || row.kind === "invalid_trajectory" ? `${row.error}: ${firstLine}` : firstLine;
  const at = row.at === undefined ? "" : ` at ${row.at}`;
  return `${where} failed (${action}): ${what}${at} [the first failure like this; every failure is in failures.jsonl]`;
}
