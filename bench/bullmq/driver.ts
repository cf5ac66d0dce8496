/**
 * BullMQ's side of the distributed suite's comparison: a producer keeping `slots` nexrl task
 * messages in flight on a BullMQ queue and reading every result message from the queue's
 * `completed` events (`readResult`), served by worker processes of `worker.ts`. It carries the
 * same messages as nexrl's streams; what it lacks is nexrl's scheduler, pool and relay (its
 * workers sample nothing), which leaves it the lighter side.
 */
import { fork } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { encode, readResult, type TaskMessage } from "../../dist/distributed/messages.js";
import { watchedProcesses, type WorkerProcesses } from "../distributed/workers.js";
import { connectionOf, type Bullmq } from "./bullmq.js";

const WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));
/** Longest a worker process may take to connect. */
const READY_TIMEOUT_MS = 60_000;

/** One BullMQ contender: its queue, its producer and its worker processes. */
export interface BullmqRolloutBench {
  /** One batch of `requests` rollouts; returns `requests`. */
  batch(): Promise<number>;
  workers: WorkerProcesses;
  close(): Promise<void>;
}

/** A task message like the driver's, for row `index` of a batch. */
function taskMessage(id: string, index: number): TaskMessage {
  return {
    id,
    session: "bench",
    results: "bench-results",
    kind: "train",
    attempt: 0,
    version: 0,
    sampling: { temperature: 1, max_response_length: 16 },
    task: {
      data: { prompt: `row ${index >> 3}` },
      prompt: `row ${index >> 3}`,
      index: index >> 3,
      epoch: 0,
      batchIndex: 0,
      groupId: `0-${index >> 3}`,
      runId: index & 7,
      groupSize: 8,
      isVal: false,
      seed: index,
    },
  };
}

/** Starts `count` worker processes of `concurrency` on `queue`, sleeping `sleepMs` a rollout, and the producer. */
export async function bullmqRolloutBench(
  bullmq: Bullmq,
  options: {
    redisUrl: string;
    queue: string;
    count: number;
    concurrency: number;
    sleepMs: number;
    slots: number;
    requests: number;
  },
): Promise<BullmqRolloutBench> {
  const connection = connectionOf(options.redisUrl);
  const queue = new bullmq.Queue(options.queue, {
    connection,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: true },
  });
  const events = new bullmq.QueueEvents(options.queue, { connection });
  await events.waitUntilReady();
  const workers = watchedProcesses(options.count, () =>
    // fork() reuses this process's execArgv, which carries tsx's loader flags.
    fork(WORKER, [options.redisUrl, options.queue, String(options.concurrency), String(options.sleepMs)], {
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    }),
  );
  await Promise.all(
    workers.children.map((child) =>
      Promise.race([
        once(child, "message"),
        once(child, "exit").then(([code]) => {
          throw new Error(`a BullMQ worker exited with ${code} before it connected:\n${workers.output()}`);
        }),
        new Promise((_, reject) =>
          setTimeout(
            () => reject(new Error(`a BullMQ worker did not connect in ${READY_TIMEOUT_MS} ms`)),
            READY_TIMEOUT_MS,
          ).unref(),
        ),
      ]),
    ),
  );
  let batches = 0;
  const job = (batch: number, index: number) => ({
    name: "rollout",
    data: { body: encode(taskMessage(`${batch}-${index}`, index)) },
  });
  return {
    batch: () =>
      new Promise<number>((resolve, reject) => {
        const batch = batches++;
        const { requests } = options;
        let sent = Math.min(options.slots, requests);
        let done = 0;
        const finish = (error?: Error) => {
          events.off("completed", completed);
          events.off("failed", failed);
          if (error) reject(error);
          else resolve(requests);
        };
        const completed = ({ returnvalue }: { returnvalue: string }) => {
          const read = readResult(returnvalue);
          if (!read.ok || !read.value.ok)
            return finish(
              new Error(`a BullMQ result is not a successful result message: ${returnvalue.slice(0, 200)}`),
            );
          done++;
          if (sent < requests) {
            const next = job(batch, sent++);
            queue.add(next.name, next.data).catch(finish);
          }
          if (done === requests) finish();
        };
        const failed = ({ failedReason }: { failedReason: string }) =>
          finish(new Error(`a BullMQ job failed: ${failedReason}`));
        events.on("completed", completed);
        events.on("failed", failed);
        queue.addBulk(Array.from({ length: sent }, (_, i) => job(batch, i))).catch(finish);
      }),
    workers,
    async close() {
      await workers.stop();
      await events.close();
      await queue.close();
    },
  };
}
