/**
 * What the calling thread and the engine's worker threads say to each other.
 *
 * @module
 * @internal
 */
import type { MessagePort } from "node:worker_threads";
import type { ContextDescriptor, TaskResult, ThreadTask } from "./tasks.js";

/** Word of a worker's control array that the caller increments for each task it posts. */
export const GO = 0;
/** Word of a worker's control array that the worker increments for each task it finished. */
export const DONE = 1;
/** Word of a worker's control array that the worker sets to 1 as its first action. */
export const STARTED = 2;
/** Length of a worker's control array. */
export const CONTROL_WORDS = 3;

/** What the calling thread posts to a worker. */
export type WorkerMessage =
  | { type: "task"; context: ContextDescriptor; slot: number; task: ThreadTask }
  /** Drop the cached views of an engine that was closed (no reply). */
  | { type: "forget"; id: number };

/** A worker's answer to a task; `fatal` when the worker could not start. */
export type WorkerReply =
  { ok: true; value: TaskResult } | { ok: false; message: string; stack?: string; fatal?: boolean };

/** What a worker receives at start. */
export interface WorkerData {
  /** {@link GO}, {@link DONE} and {@link STARTED}. */
  control: Int32Array;
  /** Tasks arrive and replies leave here. */
  port: MessagePort;
}
