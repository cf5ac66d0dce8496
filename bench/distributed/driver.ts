/**
 * The driver's side of the distributed suite: batches of rollouts through the path a distributed
 * training run takes — a {@link DataLoader} batch, the {@link RolloutScheduler}, a
 * {@link RolloutRunner} whose attempts go to Redis ({@link DistributedRun}: the tasks stream, the
 * results stream, the relay of the driver's sampler) and the {@link TrajectoryPool} — run by
 * `nexrl worker` processes whose rollouts sample through the relay from the loopback server.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { ByteTokenizer } from "../../dist/engine/index.js";
import { DistributedRun } from "../../dist/distributed/driver-parts.js";
import type { RunFingerprint } from "../../dist/distributed/messages.js";
import { RolloutRunner } from "../../dist/rollouts/runner.js";
import { distributedSchema } from "../../dist/recipe/schema/rollout-worker.js";
import { OpenAIInferenceClient } from "../../dist/inference/openai/index.js";
import { groupRows, scheduledBatch } from "../pipeline/rollout.js";

/** Per-request timeout of the driver's inference client. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Longest the workers of a contender may take to send their first heartbeat. */
const JOIN_TIMEOUT_MS = 60_000;

/** One contender: batches through Redis, and the number of workers beating now. */
export interface RedisRolloutBench {
  /** One batch of `requests` rollouts; returns `requests`. */
  batch(): Promise<number>;
  /** Waits until `count` workers of this stream prefix beat. */
  waitForWorkers(count: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Opens the driver's side on `stream_prefix` with `slots` rollouts in flight, the relay on
 * 127.0.0.1 serving an inference client of the loopback server at `baseUrl`, publishing the
 * `fingerprint` of the workers' recipe.
 */
export async function redisRolloutBench(options: {
  baseUrl: string;
  redisUrl: string;
  streamPrefix: string;
  slots: number;
  requests: number;
  fingerprint: RunFingerprint;
}): Promise<RedisRolloutBench> {
  const { slots, requests } = options;
  const inference = new OpenAIInferenceClient({
    baseURL: `${options.baseUrl}/v1`,
    apiKey: "bench",
    model: "bench",
    tokenizer: new ByteTokenizer(),
    timeoutMs: REQUEST_TIMEOUT_MS,
    maxRetries: 0,
    connections: slots,
  });
  const settings = distributedSchema.parse({
    engine: "redis",
    url: options.redisUrl,
    stream_prefix: options.streamPrefix,
  });
  const run = await DistributedRun.open(
    settings,
    inference,
    (error) => {
      throw error;
    },
    { temperature: 1, max_response_length: 16 },
    options.fingerprint,
  );
  const stop = new AbortController();
  const runner = new RolloutRunner({
    createWorker: () => {
      throw new Error("a distributed runner makes no worker of its own");
    },
    numWorkers: slots,
    timeoutMs: 3_600_000,
    policy: { mode: "fail_fast" },
    inference,
    sampling: { temperature: 1, maxTokens: 16 },
    currentVersion: () => 0,
    signal: stop.signal,
    remote: run.training(true),
  });
  const rows = groupRows(requests);
  return {
    batch: () => scheduledBatch(runner, rows, `${requests} rollouts through Redis (${options.streamPrefix})`),
    async waitForWorkers(count) {
      const deadline = Date.now() + JOIN_TIMEOUT_MS;
      for (;;) {
        const alive = (await run.metrics())["workers/alive"]!;
        if (alive >= count) return;
        if (Date.now() > deadline)
          throw new Error(`${alive} of ${count} workers of ${options.streamPrefix} beat after ${JOIN_TIMEOUT_MS} ms`);
        await sleep(200);
      }
    },
    async close() {
      stop.abort();
      await run.close();
      await inference.close();
    },
  };
}
