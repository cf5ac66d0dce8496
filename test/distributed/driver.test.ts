/**
 * The driver's queue ({@link RedisRollouts}) and the worker loop against a real redis-server, with
 * the test playing the other side: duplicate results, tasks that keep being delivered, stale
 * sessions, and a server that cannot be reached.
 */
import { createClient } from "@redis/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { distributedSchema } from "../../src/recipe/schema/rollout-worker.js";
import { RedisRollouts } from "../../src/distributed/driver.js";
import {
  decode,
  encode,
  type ResultMessage,
  type RunFingerprint,
  type TaskMessage,
} from "../../src/distributed/messages.js";
import { connectRedis, StreamKeys, type Redis } from "../../src/distributed/redis.js";
import { WorkerLoop } from "../../src/distributed/worker-loop.js";
import { ConfigError, DistributedError, UserCodeError } from "../../src/errors.js";
import type { RolloutRunner } from "../../src/rollouts/runner.js";
import { task } from "../support/pipeline.js";
import { redisAvailable, startRedis, type TestRedis } from "./redis-server.js";

type Client = ReturnType<typeof createClient>;

/** The driver's sampling settings the tasks of these tests carry. */
const sampling = { temperature: 0.7, max_response_length: 5 };
/** The recipe fingerprint of the drivers and workers of these tests. */
const fingerprint: RunFingerprint = {
  nexrl: "0.0.0-test",
  model: "tiny",
  tokenizer: "tiny",
  worker_type: "simple",
  modules: {},
};

describe.skipIf(!redisAvailable)("distributed rollouts: the driver's queue and the worker loop", () => {
  let redis: TestRedis;
  let client: Client;
  let prefixes = 0;

  beforeAll(async () => {
    redis = await startRedis();
    client = createClient({ url: redis.url });
    await client.connect();
  });
  afterAll(async () => {
    client?.destroy();
    await redis?.stop();
  });

  const settings = (extra: Record<string, unknown> = {}) =>
    distributedSchema.parse({ engine: "redis", url: redis.url, stream_prefix: `unit${++prefixes}`, ...extra });

  /** Reads one task as consumer `name`, without acknowledging it. */
  async function takeTask(keys: StreamKeys, name: string): Promise<{ entry: string; message: TaskMessage }> {
    for (;;) {
      const replies = (await client.xReadGroup(
        keys.group,
        name,
        { key: keys.tasks, id: ">" },
        { COUNT: 1, BLOCK: 200 },
      )) as Array<{ messages: Array<{ id: string; message: { body: string } }> }> | null;
      const first = replies?.[0]?.messages[0];
      if (first) return { entry: first.id, message: decode<TaskMessage>(first.message.body) };
    }
  }

  const answer = (message: TaskMessage, result: Partial<ResultMessage> & { ok: boolean }) =>
    client.xAdd(message.results, "*", {
      body: encode({ id: message.id, worker: "test", deliveries: 1, trajectories: [], unknownTokenIds: 0, ...result }),
    });

  it("settles an attempt with its first result and counts a second one as a duplicate", async () => {
    const s = settings();
    const rollouts = await RedisRollouts.open(s, () => undefined, fingerprint);
    const keys = new StreamKeys(s.stream_prefix);
    try {
      const attempts = rollouts.attempts("train", undefined, sampling);
      const pending = attempts.run(task({ groupId: "3-0", runId: 2, seed: 99 }), 1, 4, new AbortController().signal);
      const { message } = await takeTask(keys, "w1");
      expect(message).toMatchObject({ kind: "train", attempt: 1, version: 4, session: rollouts.session, sampling });
      // The session's fingerprint is published for the workers to check their recipes against.
      expect(decode(String(await client.get(keys.fingerprint(rollouts.session))))).toEqual(fingerprint);
      expect(message.task).toMatchObject({ groupId: "3-0", runId: 2, seed: 99 });
      const trajectory = { tokens: [1, 2, 3], lossMask: [0, 1, 1], reward: 0.5, logprobs: [0, -Infinity, -0.5] };
      await answer(message, { ok: true, trajectories: [trajectory], unknownTokenIds: 1, deliveries: 2 });
      await answer(message, { ok: true, trajectories: [{ ...trajectory, reward: 9 }] });
      const result = await pending;
      // The first result wins, non-finite logprobs intact.
      expect(result.trajectories).toEqual([trajectory]);
      expect(result.unknownTokenIds).toBe(1);
      // Both results counted: the first as a finished task (reclaimed: delivered twice), the second as a duplicate.
      const counts = { tasks: 0, failures: 0, duplicates: 0, reclaimed: 0 };
      const add = () => {
        for (const [key, value] of Object.entries(rollouts.takeCounts())) counts[key as keyof typeof counts] += value;
        return counts;
      };
      await expect.poll(add, { interval: 50 }).toEqual({ tasks: 1, failures: 0, duplicates: 1, reclaimed: 1 });
    } finally {
      await rollouts.close();
    }
    // A closed driver's session, fingerprint and results stream are gone: workers drop its tasks.
    expect(await client.get(keys.session)).toBeNull();
    expect(await client.keys(`${keys.prefix}:fingerprint:*`)).toEqual([]);
  });

  it("turns a failure a worker reported into the error the failure policy sees", async () => {
    const s = settings();
    const rollouts = await RedisRollouts.open(s, () => undefined, fingerprint);
    const keys = new StreamKeys(s.stream_prefix);
    try {
      const attempts = rollouts.attempts("train", undefined, sampling);
      // Each attempt's rejection is handled from the start: the driver may read the worker's
      // answer (and reject the attempt) before the test's own XADD has returned.
      const timedOut = attempts.run(task(), 0, 0, new AbortController().signal).catch((e: unknown) => e);
      const first = await takeTask(keys, "w1");
      await answer(first.message, {
        ok: false,
        error: { name: "UserCodeError", message: "took too long", problem: "timeout", retryable: true },
      });
      const error = await timedOut;
      expect(error).toBeInstanceOf(UserCodeError);
      expect((error as UserCodeError).problem).toBe("timeout");
      expect((error as Error).message).toBe("took too long (on nexrl worker test)");
      const buggy = attempts.run(task(), 0, 0, new AbortController().signal).catch((e: unknown) => e);
      const second = await takeTask(keys, "w1");
      await answer(second.message, {
        ok: false,
        error: { name: "TypeError", message: "x is undefined", retryable: false },
      });
      expect(await buggy).toMatchObject({
        message: "TypeError: x is undefined (on nexrl worker test)",
        isRetryable: false,
      });
    } finally {
      await rollouts.close();
    }
  });

  it("fails a task delivered more than max_deliveries times without a result, and drops tasks of a stale session", async () => {
    const s = settings({ max_deliveries: 2 });
    const rollouts = await RedisRollouts.open(s, () => undefined, fingerprint);
    const keys = new StreamKeys(s.stream_prefix);
    const redisClient = await connectRedis(s.url, () => undefined);
    const reader = await connectRedis(s.url, () => undefined);
    let ran = 0;
    const loop = new WorkerLoop({
      redis: redisClient,
      reader,
      keys,
      name: "survivor",
      concurrency: 1,
      // Claims at once: the ghosts below are dead.
      claimIdleMs: 1,
      maxDeliveries: s.max_deliveries,
      heartbeatMs: 100,
      fingerprint,
      log: () => undefined,
      runnerFor: () => {
        ran++;
        throw new Error("no task should run here");
      },
    });
    let running: Promise<void> | undefined;
    try {
      const attempts = rollouts.attempts("train", undefined, sampling);
      const dying = attempts.run(task(), 0, 0, new AbortController().signal);
      // Two workers took it in turn and died (read, never acknowledged): the third delivery is one too many.
      await takeTask(keys, "ghost1");
      await new Promise((resolve) => setTimeout(resolve, 5));
      const claimed = await client.xAutoClaim(keys.tasks, keys.group, "ghost2", 1, "0-0", { COUNT: 10 });
      expect(claimed.messages).toHaveLength(1);
      // A stale session's task is acknowledged unrun.
      await client.xAdd(keys.tasks, "*", { body: encode({ ...staleTask(keys), session: "gone" }) });
      await new Promise((resolve) => setTimeout(resolve, 5));
      running = loop.run();
      const error = await dying.catch((e: unknown) => e);
      expect((error as Error).message).toContain("the task was delivered 3 times without a result");
      expect((error as Error).message).toContain("rollout_worker.distributed.max_deliveries (2)");
      expect((error as { isRetryable?: boolean }).isRetryable).toBe(true);
      // Nothing is left pending once the stale task is read too: both were acknowledged, neither ran.
      // Answered tasks are deleted: the stream holds only tasks not answered yet.
      await expect.poll(() => client.xLen(keys.tasks), { interval: 50 }).toBe(0);
      expect((await client.xPending(keys.tasks, keys.group)).pending).toBe(0);
      expect(ran).toBe(0);
    } finally {
      loop.stop();
      await running;
      redisClient.destroy();
      reader.destroy();
      await rollouts.close();
    }
  });

  it("moves tasks that are not nexrl task messages to the dead-letter stream once each, with one log line, and runs on", async () => {
    const s = settings({ max_deliveries: 2 });
    const keys = new StreamKeys(s.stream_prefix);
    await keys.ensureGroup(client as unknown as Redis);
    const redisClient = await connectRedis(s.url);
    const reader = await connectRedis(s.url);
    const lines: string[] = [];
    let ran = 0;
    const loop = new WorkerLoop({
      redis: redisClient,
      reader,
      keys,
      name: "reader",
      concurrency: 2,
      // Claims at once: a task left unacknowledged would come back at every look.
      claimIdleMs: 1,
      maxDeliveries: s.max_deliveries,
      heartbeatMs: 50,
      fingerprint,
      log: (line) => lines.push(line),
      runnerFor: () =>
        ({
          once: () => {
            ran++;
            return Promise.resolve({ trajectories: [], unknownTokenIds: 0 });
          },
        }) as unknown as RolloutRunner,
    });
    await client.set(keys.fingerprint("live"), encode(fingerprint));
    await client.set(keys.session, "live");
    const good: TaskMessage = { ...staleTask(keys), id: "live:1", session: "live", results: keys.results("live") };
    await client.xAdd(keys.tasks, "*", { body: "null" });
    await client.xAdd(keys.tasks, "*", { body: "{not json" });
    await client.xAdd(keys.tasks, "*", { other: "no body" });
    await client.xAdd(keys.tasks, "*", { body: encode({ ...good, task: { ...good.task, seed: "7" } }) });
    await client.xAdd(keys.tasks, "*", { body: encode(good) });
    const running = loop.run();
    try {
      await expect.poll(() => ran, { interval: 20 }).toBe(1);
      await expect.poll(() => client.xLen(keys.tasks), { interval: 20 }).toBe(0);
      // Several claim looks later nothing came back: each bad task was delivered once.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await client.xLen(keys.deadLetters)).toBe(4);
      expect(await client.get(keys.deadLetterCount)).toBe("4");
      expect((await client.xPending(keys.tasks, keys.group)).pending).toBe(0);
      const letters = (await client.xRange(keys.deadLetters, "-", "+")) ?? [];
      expect(letters.map((letter) => letter!.message.problem)).toEqual([
        "Invalid input: expected object, received null",
        "its body is not JSON",
        "the entry has no body field",
        "task.seed: Invalid input: expected number, received string",
      ]);
      expect(letters[0]!.message).toMatchObject({ source: keys.tasks, body: "null" });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(
        `is not a nexrl task message (Invalid input: expected object, received null): moved to the dead-letter stream ${keys.deadLetters}`,
      );
      // The good task was answered.
      const [answer] = (await client.xRange(keys.results("live"), "-", "+")) ?? [];
      expect(decode<ResultMessage>(String(answer!.message.body))).toMatchObject({ id: "live:1", ok: true });
    } finally {
      loop.stop();
      await running;
      redisClient.destroy();
      reader.destroy();
    }
  });

  it("moves results that are not nexrl result messages to the dead-letter stream with one warning, counts them, and goes on", async () => {
    const s = settings();
    const warnings: string[] = [];
    const rollouts = await RedisRollouts.open(s, (error) => warnings.push(error.message), fingerprint);
    const keys = new StreamKeys(s.stream_prefix);
    try {
      const pending = rollouts.attempts("train", undefined, sampling).run(task(), 0, 0, new AbortController().signal);
      const { message } = await takeTask(keys, "w1");
      await client.xAdd(message.results, "*", { body: "not json at all" });
      await client.xAdd(message.results, "*", { body: encode({ id: message.id }) });
      await answer(message, { ok: true });
      expect(await pending).toEqual({ trajectories: [], unknownTokenIds: 0 });
      await expect.poll(() => client.xLen(keys.deadLetters), { interval: 20 }).toBe(2);
      expect(await rollouts.takeDeadLetters()).toBe(2);
      expect(await rollouts.takeDeadLetters()).toBe(0);
      expect(warnings).toEqual([
        expect.stringContaining(
          "is not a nexrl result message (its body is not JSON): moved to the dead-letter stream",
        ),
      ]);
      expect(rollouts.takeCounts()).toMatchObject({ tasks: 1, failures: 0, duplicates: 0 });
    } finally {
      await rollouts.close();
    }
  });

  /** A worker loop on `s` with `print`, whose rollouts count in `ran` and succeed at once; `lines` gets its log. */
  async function workerLoop(
    s: ReturnType<typeof settings>,
    print: RunFingerprint,
    ran: { count: number },
    lines: string[] = [],
  ): Promise<{ loop: WorkerLoop; close: () => void }> {
    const [redisClient, reader] = [await connectRedis(s.url), await connectRedis(s.url)];
    const loop = new WorkerLoop({
      redis: redisClient,
      reader,
      keys: new StreamKeys(s.stream_prefix),
      concurrency: 2,
      claimIdleMs: 60_000,
      maxDeliveries: s.max_deliveries,
      heartbeatMs: 100,
      fingerprint: print,
      log: (line) => lines.push(line),
      runnerFor: () =>
        ({
          once: () => {
            ran.count++;
            return Promise.resolve({ trajectories: [], unknownTokenIds: 0 });
          },
        }) as unknown as RolloutRunner,
    });
    return { loop, close: () => [redisClient, reader].forEach((c) => c.destroy()) };
  }

  it("refuses the tasks of a driver whose recipe differs, naming what differs, and hands them back unrun", async () => {
    const s = settings();
    const keys = new StreamKeys(s.stream_prefix);
    const ran = { count: 0 };
    // Started before the driver: it finds the difference in the first tasks it reads.
    const other = await workerLoop(s, { ...fingerprint, model: "small" }, ran);
    const refused = other.loop.run().catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const rollouts = await RedisRollouts.open(s, () => undefined, fingerprint);
    const same = await workerLoop(s, fingerprint, ran);
    try {
      const pending = rollouts.attempts("train", undefined, sampling).run(task(), 0, 0, new AbortController().signal);
      const error = await refused;
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toBe(
        `this worker's recipe does not match the run's driver (stream prefix ${s.stream_prefix}): model small vs the driver's tiny; start the worker with the driver's recipe`,
      );
      expect(ran.count).toBe(0);
      // The task went back to the stream, for a worker with the driver's recipe.
      expect((await client.xPending(keys.tasks, keys.group)).pending).toBe(0);
      expect(await client.xLen(keys.tasks)).toBe(1);
      // Started once the driver runs: it is refused before it reads a task.
      const late = await workerLoop(s, { ...fingerprint, worker_type: "sft" }, ran);
      await expect(late.loop.run()).rejects.toThrow(/: worker type sft vs the driver's simple; start the worker/);
      late.close();
      const running = same.loop.run();
      expect(await pending).toEqual({ trajectories: [], unknownTokenIds: 0 });
      expect(ran.count).toBe(1);
      same.loop.stop();
      await running;
    } finally {
      other.close();
      same.close();
      await rollouts.close();
    }
  });

  it("runs the tasks of a driver session that published no fingerprint (an older nexrl), saying so once", async () => {
    const s = settings();
    const keys = new StreamKeys(s.stream_prefix);
    await keys.ensureGroup(client as unknown as Redis);
    await client.set(keys.session, "old");
    const old: TaskMessage = { ...staleTask(keys), session: "old", results: keys.results("old") };
    await client.xAdd(keys.tasks, "*", { body: encode({ ...old, id: "old:1" }) });
    await client.xAdd(keys.tasks, "*", { body: encode({ ...old, id: "old:2" }) });
    const ran = { count: 0 };
    const lines: string[] = [];
    const worker = await workerLoop(s, fingerprint, ran, lines);
    const running = worker.loop.run();
    try {
      await expect.poll(() => client.xLen(keys.results("old")), { interval: 20 }).toBe(2);
      expect(ran.count).toBe(2);
      expect(lines).toEqual([
        "driver session old published no recipe fingerprint (a driver of an older nexrl?): its tasks run without checking that this worker's recipe is the driver's",
      ]);
    } finally {
      worker.loop.stop();
      await running;
      worker.close();
    }
  });

  it("puts the session's fingerprint back with the session key after a Redis restart without persistence", async () => {
    const server = await startRedis();
    const s = distributedSchema.parse({ engine: "redis", url: server.url, stream_prefix: "restarted" });
    const keys = new StreamKeys(s.stream_prefix);
    const rollouts = await RedisRollouts.open(s, () => undefined, fingerprint);
    let probe: Client | undefined;
    try {
      await server.signal("SIGKILL");
      await server.restart();
      probe = createClient({ url: server.url });
      await probe.connect();
      // The driver puts back what the empty server lost once it has reconnected.
      await expect.poll(() => probe!.get(keys.session), { timeout: 20_000, interval: 100 }).toBe(rollouts.session);
      expect(decode(String(await probe.get(keys.fingerprint(rollouts.session))))).toEqual(fingerprint);
      const other = await workerLoop(s, { ...fingerprint, nexrl: "9.9.9" }, { count: 0 });
      await expect(other.loop.run()).rejects.toThrow("nexrl 9.9.9 vs the driver's 0.0.0-test");
      other.close();
    } finally {
      probe?.destroy();
      await rollouts.close();
      await server.stop();
    }
  });

  it("says which server failed and what to check, never the password", async () => {
    const secured = await startRedis({ password: "s3cret-pass-word" });
    try {
      const wrong = secured.url.replace("s3cret-pass-word", "not-the-password");
      const error = await connectRedis(wrong, () => undefined).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DistributedError);
      const message = (error as Error).message;
      expect(message).toContain(`the Redis server 127.0.0.1:${secured.port} failed`);
      expect(message).toContain("check the user and password of rollout_worker.distributed.url");
      expect(message).not.toContain("not-the-password");
      const good = await connectRedis(secured.url, () => undefined);
      expect(await good.ping()).toBe("PONG");
      good.destroy();
    } finally {
      await secured.stop();
    }
    const refused = await connectRedis(`redis://:pw-in-url-123@127.0.0.1:${redis.port + 1}`, () => undefined).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(DistributedError);
    expect((refused as Error).message).toContain("check that redis-server runs there");
    expect((refused as Error).message).not.toContain("pw-in-url-123");
  });
});

/** A task message of another session, for the stale-session check. */
function staleTask(keys: StreamKeys): TaskMessage {
  return {
    id: "gone:1",
    session: "gone",
    results: keys.results("gone"),
    kind: "train",
    attempt: 0,
    version: 0,
    sampling,
    task: task(),
  };
}
