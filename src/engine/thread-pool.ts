/**
 * The worker threads of the engines of one thread (the main thread, or an engine host of
 * `engine-host.ts`): one pool, shared by every engine and sampler of that thread, grown to the
 * largest thread count asked for and shut down when the last engine using it closes.
 *
 * The engine's API is synchronous, and so is the hand-off: the calling thread posts each
 * worker its task on a `MessagePort`, wakes it with `Atomics.notify`, does its own share, then
 * blocks in `Atomics.wait` until every worker has signalled, and takes the replies with
 * `receiveMessageOnPort`. Idle workers block in `Atomics.wait` too, so they cost no CPU; they are
 * `unref`'d, so they never keep the process alive.
 *
 * Workers load `thread-worker.js` next to this module (see {@link workerModule} for the
 * TypeScript sources).
 *
 * @module
 * @internal
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import type { ContextDescriptor, TaskResult, ThreadTask } from "./tasks.js";
import {
  CONTROL_WORDS,
  DONE,
  GO,
  STARTED,
  type WorkerData,
  type WorkerMessage,
  type WorkerReply,
} from "./thread-protocol.js";
import { workerModule } from "./worker-module.js";
import { EngineError } from "../errors.js";

interface PoolWorker {
  worker: Worker;
  port: MessagePort;
  control: Int32Array;
  /** Tasks posted so far; DONE reaches it when the last one is finished. */
  posted: number;
}

/** How long a new worker may take to run its first line before the caller gives up on it. */
const START_TIMEOUT_MS = 60_000;
const START_POLL_MS = 250;

/**
 * The worker's entry: a module in a `data:` URL (so that no flag of the parent, such as
 * `--input-type`, changes how it is read) that marks the worker started, imports
 * `thread-worker` (after tsx's loader when run from the sources) and serves. A worker that
 * cannot import it answers its first task with the reason instead of leaving the caller waiting.
 */
function bootstrapUrl(): URL {
  const { entry, register } = workerModule(import.meta.url, "thread-worker");
  const source = `import { workerData } from "node:worker_threads";
Atomics.store(workerData.control, ${STARTED}, 1);
try {
  ${register}
  (await import(${JSON.stringify(entry)})).serve(workerData);
} catch (err) {
  workerData.port.postMessage({ ok: false, fatal: true, message: "the engine's worker thread failed to start: " + String((err && err.stack) || err) });
  Atomics.add(workerData.control, ${DONE}, 1);
  Atomics.notify(workerData.control, ${DONE});
}
`;
  return new URL(`data:text/javascript,${encodeURIComponent(source)}`);
}

/** The process's engine worker threads. */
export class ThreadPool {
  private workers: Array<PoolWorker | undefined> = [];
  private users = 0;
  private entry: URL | undefined;

  /** Counts an engine that will run tasks on the pool until it calls {@link ThreadPool.release}. */
  acquire(): void {
    this.users++;
  }

  /** Ends an {@link ThreadPool.acquire}; the last one terminates the workers. */
  async release(forgetId: number): Promise<void> {
    for (const w of this.workers) w?.port.postMessage({ type: "forget", id: forgetId } satisfies WorkerMessage);
    this.users = Math.max(0, this.users - 1);
    if (this.users === 0) await this.shutdown();
  }

  /** Number of live workers. */
  get size(): number {
    return this.workers.filter(Boolean).length;
  }

  /**
   * Runs `tasks[i]` (when not null) on worker i and `local` on this thread meanwhile, then
   * waits for all. Throws the first failure, after every worker has finished.
   * @returns the workers' results (null where there was no task) and `local`'s.
   */
  run<L>(
    context: ContextDescriptor,
    tasks: Array<{ slot: number; task: ThreadTask } | null>,
    local: () => L,
  ): { local: L; remote: TaskResult[] } {
    const started: Array<PoolWorker | null> = [];
    let failure: unknown;
    for (const [i, t] of tasks.entries()) {
      let w: PoolWorker | null = null;
      if (t && failure === undefined) {
        try {
          w = this.worker(i);
          w.port.postMessage({ type: "task", context, slot: t.slot, task: t.task } satisfies WorkerMessage);
          w.posted++;
          Atomics.add(w.control, GO, 1);
          Atomics.notify(w.control, GO);
        } catch (err) {
          // Workers already started must still be waited for: they write into the engine's memory.
          failure = err;
          w = null;
        }
      }
      started.push(w);
    }
    let localResult: L | undefined;
    if (failure === undefined) {
      try {
        localResult = local();
      } catch (err) {
        failure = err;
      }
    }
    const remote: TaskResult[] = started.map((w) => {
      if (!w) return null;
      const reply = this.awaitReply(w);
      if (reply?.ok) return reply.value;
      if (!reply || reply.fatal) this.discard(w);
      failure ??= new EngineError(
        reply
          ? reply.message
          : `an engine worker thread did not start within ${START_TIMEOUT_MS / 1000} s; run with threads: 1 to compute on the calling thread only`,
        { code: "thread", workerStack: reply && !reply.ok ? reply.stack : undefined },
      );
      return null;
    });
    if (failure !== undefined) throw failure;
    return { local: localResult as L, remote };
  }

  /**
   * Waits until `w` has finished its last task and returns its reply; undefined when the worker
   * never started (it is given {@link START_TIMEOUT_MS}) or ended without answering.
   */
  private awaitReply(w: PoolWorker): WorkerReply | undefined {
    let waited = 0;
    for (;;) {
      const done = Atomics.load(w.control, DONE);
      if (done >= w.posted) return receiveMessageOnPort(w.port)?.message as WorkerReply | undefined;
      if (Atomics.load(w.control, STARTED)) {
        Atomics.wait(w.control, DONE, done);
      } else if (Atomics.wait(w.control, DONE, done, START_POLL_MS) === "timed-out") {
        waited += START_POLL_MS;
        if (waited >= START_TIMEOUT_MS && !Atomics.load(w.control, STARTED)) return undefined;
      }
    }
  }

  /** Terminates every worker (they are started again on demand). */
  async shutdown(): Promise<void> {
    const workers = this.workers.filter((w) => w !== undefined);
    this.workers = [];
    await Promise.all(workers.map((w) => w.worker.terminate()));
  }

  private worker(index: number): PoolWorker {
    let w = this.workers[index];
    if (!w) {
      const control = new Int32Array(new SharedArrayBuffer(CONTROL_WORDS * 4));
      const { port1, port2 } = new MessageChannel();
      this.entry ??= bootstrapUrl();
      const worker = new Worker(this.entry, {
        // The parent's flags stay out: a loader the parent was started with (such as tsx's, which
        // runs its hooks on a thread of its own) would cost every worker its memory for nothing.
        execArgv: [],
        workerData: { control, port: port2 } satisfies WorkerData,
        transferList: [port2],
        name: `nexrl-engine-${index + 1}`,
      });
      worker.unref();
      // A worker's failures are reported through its replies; this only keeps an 'error' event
      // from becoming an uncaught exception of the process.
      worker.on("error", () => undefined);
      w = { worker, port: port1, control, posted: 0 };
      this.workers[index] = w;
    }
    return w;
  }

  /** Terminates a failed worker; a new one takes its index on the next task. */
  private discard(w: PoolWorker): void {
    const i = this.workers.indexOf(w);
    if (i >= 0) this.workers[i] = undefined;
    void w.worker.terminate();
  }
}

/** The pool of this thread (each thread that runs engines has its own). */
export const threadPool = new ThreadPool();
