/**
 * A BullMQ worker process of the distributed suite (forked with tsx's loader): it takes nexrl
 * task messages from a BullMQ queue, checks each as `nexrl worker` does (`readTask`), sleeps as
 * the suite's sleep worker does, and answers with a result message of the same trajectory
 * (`encode`), the job's return value. Arguments: REDIS_URL QUEUE CONCURRENCY SLEEP_MS.
 * It tells the parent `ready` when its connection is up, and closes on SIGTERM.
 */
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { encode, readTask, type ResultMessage } from "../../dist/distributed/messages.js";
import { sleepTrajectory } from "../distributed/recipe.js";
import { connectionOf, loadBullmq } from "./bullmq.js";

const [redisUrl, queue, concurrency, sleepMs] = process.argv.slice(2) as [string, string, string, string];
const { bullmq } = await loadBullmq(() => undefined);
const name = `bullmq-${process.pid}`;
const worker = new bullmq.Worker(
  queue,
  async (job) => {
    const read = readTask(job.data.body);
    if (!read.ok) throw new Error(`not a task message: ${read.problem}`);
    await sleep(Number(sleepMs));
    const result: ResultMessage = {
      id: read.value.id,
      worker: name,
      deliveries: job.attemptsMade + 1,
      ok: true,
      trajectories: [sleepTrajectory()],
      unknownTokenIds: 0,
    };
    return encode(result);
  },
  { connection: connectionOf(redisUrl), concurrency: Number(concurrency) },
);
worker.on("error", (error) => process.stderr.write(`bullmq worker: ${error.message}\n`));
await worker.waitUntilReady();
process.send!("ready");
process.once("SIGTERM", () => {
  void worker.close().then(() => process.exit(0));
});
