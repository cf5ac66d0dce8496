/**
 * Entry of an engine worker thread: waits for tasks from the calling thread and runs them on
 * the engine storage they name, until the thread is terminated.
 *
 * @module
 * @internal
 */
import { receiveMessageOnPort, type MessagePort } from "node:worker_threads";
import { openContext, runTask, type ThreadContext } from "./tasks.js";
import { DONE, GO, type WorkerData, type WorkerMessage, type WorkerReply } from "./thread-protocol.js";

/** Engines whose views a worker keeps between tasks (the least recently used is dropped). */
const CACHED_CONTEXTS = 4;

/** The next task on `port`, after applying the `forget` messages queued before it. */
function nextTask(port: MessagePort, contexts: Map<number, ThreadContext>): Extract<WorkerMessage, { type: "task" }> {
  for (;;) {
    const message = receiveMessageOnPort(port)?.message as WorkerMessage | undefined;
    if (!message) throw new Error("internal: woken without a task");
    if (message.type === "task") return message;
    contexts.delete(message.id);
  }
}

/** Serves tasks forever (the pool terminates the thread). */
export function serve(data: WorkerData): void {
  const contexts = new Map<number, ThreadContext>();
  let seen = 0;
  for (;;) {
    Atomics.wait(data.control, GO, seen);
    const go = Atomics.load(data.control, GO);
    if (go === seen) continue;
    seen = go;
    let reply: WorkerReply;
    try {
      const { context, slot, task } = nextTask(data.port, contexts);
      let ctx = contexts.get(context.id);
      if (ctx) contexts.delete(context.id);
      else ctx = openContext(context);
      contexts.set(context.id, ctx);
      if (contexts.size > CACHED_CONTEXTS) contexts.delete(contexts.keys().next().value!);
      reply = { ok: true, value: runTask(ctx, slot, task) };
    } catch (err) {
      const e = err as Error;
      reply = { ok: false, message: `engine worker thread: ${e?.message ?? String(err)}`, stack: e?.stack };
    }
    data.port.postMessage(reply);
    Atomics.add(data.control, DONE, 1);
    Atomics.notify(data.control, DONE);
  }
}
