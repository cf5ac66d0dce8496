/**
 * A Redis that goes away mid-step: killed (-9) and restarted, with and without persistence, or
 * stalled (SIGSTOP). The driver (warnings on stdout) and the `nexrl worker` process (on stderr)
 * of the built CLI say so, wait, and
 * the run ends with the metrics of the same seeded run in one process.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCli, until, type CliProcess } from "./cli.js";
import { drive, metrics, recipe, runFolder, stopWorkers, untimed, workerArgs, type Row } from "./cli-runs.js";
import { redisAvailable, startRedis, type TestRedis } from "./redis-server.js";

/** A process run (the driver's, the worker's) takes seconds on a busy machine. */
const TIMEOUT_MS = 180_000;

/** A gated run on `redis`: the driver and one worker, up to where step 1's first rollouts wait at the gate. */
async function startGatedRun(
  redis: TestRedis,
): Promise<{ dir: string; gate: string; driver: CliProcess; worker: CliProcess }> {
  const dir = await runFolder(recipe({ url: redis.url, prefix: "restart" }));
  const started = join(dir, "started.txt");
  const gate = join(dir, "gate");
  await writeFile(started, "");
  const worker = startCli(workerArgs("gated"), dir, {
    NEXRL_TEST_ROLE: "gate",
    NEXRL_TEST_STARTED: started,
    NEXRL_TEST_GATE: gate,
  });
  await until(() => worker.stdout().includes("rollout(s) at once"), "the worker started", worker.exited);
  const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
  // The driver sends 3 attempts at once (num_workers), the worker runs 2: one waits in the stream.
  await until(
    async () => (await readFile(started, "utf8")).split("\n").filter(Boolean).length === 2,
    "the worker took two tasks",
    driver.exited,
  );
  return { dir, gate, driver, worker };
}

describe.skipIf(!redisAvailable)("distributed rollouts: a Redis that restarts or stalls", () => {
  let baseline: Row[];
  const servers: TestRedis[] = [];

  beforeAll(async () => {
    const dir = await runFolder(recipe());
    await drive(dir);
    baseline = await metrics(dir);
  }, TIMEOUT_MS);
  afterAll(async () => {
    for (const server of servers) await server.stop();
  });

  for (const appendonly of [false, true])
    it(
      `survives redis-server killed (-9) and restarted mid-step, ${appendonly ? "with" : "without"} persistence`,
      async () => {
        const redis = await startRedis({ appendonly });
        servers.push(redis);
        const { dir, gate, driver, worker } = await startGatedRun(redis);
        await redis.signal("SIGKILL");
        const reconnecting = /Redis at 127\.0\.0\.1:\d+ not answering, reconnecting \(\d+ s\)/;
        await until(() => reconnecting.test(driver.stdout()), "the driver said it reconnects", driver.exited);
        await until(() => reconnecting.test(worker.stderr()), "the worker said it reconnects", worker.exited);
        await redis.restart();
        // The rollouts in flight end after the restart, and after the driver's first look for lost
        // tasks (at its reconnection): their results go to the server that is back, and the tasks
        // their worker runs are not sent again, though their entries are gone with the server.
        const answering = /Redis at 127\.0\.0\.1:\d+ answering again after \d+ s/;
        await until(() => answering.test(driver.stdout()), "the driver reconnected", driver.exited);
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        await writeFile(gate, "");
        expect(await driver.exited, driver.stderr()).toBe(0);
        await stopWorkers([worker]);
        // Nothing lost, nothing doubled: the trajectories of the uninterrupted run, once each.
        expect((await metrics(dir)).map(untimed)).toEqual(baseline.map(untimed));
        expect(driver.stdout()).toMatch(/Redis at 127\.0\.0\.1:\d+ answering again after \d+ s/);
        expect(worker.stderr()).toMatch(/Redis at 127\.0\.0\.1:\d+ answering again after \d+ s/);
        // Without persistence the task waiting in the stream was lost with it, and sent again.
        const resent = /lost 1 task\(s\) waiting for a result \(restarted without persistence\?\): sent them again/;
        if (appendonly) expect(driver.stdout()).not.toMatch(resent);
        else expect(driver.stdout()).toMatch(resent);
        expect(worker.stderr()).not.toContain("a bug in nexrl");
      },
      TIMEOUT_MS,
    );

  it(
    "warns while redis-server stalls (SIGSTOP) and goes on once it answers",
    async () => {
      const redis = await startRedis();
      servers.push(redis);
      const { dir, gate, driver, worker } = await startGatedRun(redis);
      await redis.signal("SIGSTOP");
      const stalled = /Redis at 127\.0\.0\.1:\d+ not answering \(\d+ s without a reply: stalled or overloaded\?\)/;
      await until(() => stalled.test(driver.stdout()), "the driver warned of the stall", driver.exited);
      await until(() => stalled.test(worker.stderr()), "the worker warned of the stall", worker.exited);
      await redis.signal("SIGCONT");
      await writeFile(gate, "");
      expect(await driver.exited, driver.stderr()).toBe(0);
      await stopWorkers([worker]);
      expect((await metrics(dir)).map(untimed)).toEqual(baseline.map(untimed));
    },
    TIMEOUT_MS,
  );
});
