/**
 * Distributed rollouts end to end: a real redis-server, the driver and `nexrl worker` processes
 * of the built CLI, against the same seeded run in one process.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient } from "@redis/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startCli, until } from "./cli.js";
import { drive, metrics, recipe, runFolder, stopWorkers, sum, untimed, workerArgs, type Row } from "./cli-runs.js";
import { redisAvailable, startRedis, type TestRedis } from "./redis-server.js";
import { fixture } from "../support/pipeline.js";

const letter = fixture("letter-worker.ts");

// A process run (the driver's, a worker's) takes seconds on a busy machine: under a load average
// of 10 on 2 cores a test here took 35 s.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });

describe.skipIf(!redisAvailable)("distributed rollouts (redis-server, driver and nexrl worker processes)", () => {
  let redis: TestRedis;
  let client: ReturnType<typeof createClient>;
  let baseline: Row[];
  let prefixes = 0;
  const nextPrefix = (): string => `test${++prefixes}`;

  beforeAll(async () => {
    redis = await startRedis();
    client = createClient({ url: redis.url });
    await client.connect();
    const dir = await runFolder(recipe());
    await drive(dir);
    baseline = await metrics(dir);
  });
  afterAll(async () => {
    client?.destroy();
    await redis?.stop();
  });

  it("gives the metrics of the same seeded run in one process, with 3 workers", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }));
    const workers = ["a", "b", "c"].map((name) =>
      startCli(["worker", "-c", "recipe.yaml", "--concurrency", "2", "--name", name], dir),
    );
    for (const worker of workers)
      await until(() => worker.stdout().includes("rollout(s) at once"), "the worker started", worker.exited);
    const driver = await drive(dir);
    await stopWorkers(workers);
    const rows = await metrics(dir);
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    expect(rows.map((row) => row["workers/alive"])).toEqual([3, 3]);
    expect(rows.map((row) => row["workers/reclaimed"])).toEqual([0, 0]);
    // Every task ran on some worker: 2 steps of 2 rows × 4 copies, none failed.
    const finished = workers.map((w) => Number(/stopped after (\d+) task/.exec(w.stdout())?.[1]));
    expect(finished.reduce((a, b) => a + b, 0)).toBe(16);
    expect(driver.stdout()).toMatch(/workers 3 \(\d+ tasks, 0 failed\)/);
  });

  it("loses and doubles no trajectory when a worker is killed with tasks in flight, and counts them reclaimed", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }));
    const started = join(dir, "started.txt");
    await writeFile(started, "");
    const victim = startCli(workerArgs("victim"), dir, {
      NEXRL_TEST_ROLE: "stall",
      NEXRL_TEST_STARTED: started,
    });
    await until(() => victim.stdout().includes("rollout(s) at once"), "the victim started", victim.exited);
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
    const taken = async (): Promise<number> => (await readFile(started, "utf8")).split("\n").filter(Boolean).length;
    await until(async () => (await taken()) === 2, "the victim took two tasks", victim.exited);
    victim.child.kill("SIGKILL");
    expect(await victim.exited).toBe("SIGKILL");
    const workers = ["a", "b"].map((name) =>
      startCli(["worker", "-c", "recipe.yaml", "--concurrency", "2", "--name", name], dir),
    );
    expect(await driver.exited, driver.stderr()).toBe(0);
    await stopWorkers(workers);
    const rows = await metrics(dir);
    // The victim's two tasks ran again elsewhere: the same trajectories as in one process, once each.
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    expect(sum(rows, "workers/reclaimed")).toBe(2);
    expect(sum(rows, "rollout/failed")).toBe(0);
  });

  it("hands back the tasks in flight on SIGTERM and exits 0; other workers run them", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }));
    const started = join(dir, "started.txt");
    await writeFile(started, "");
    const leaving = startCli(workerArgs(), dir, { NEXRL_TEST_ROLE: "stall", NEXRL_TEST_STARTED: started });
    await until(() => leaving.stdout().includes("rollout(s) at once"), "the worker started", leaving.exited);
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
    await until(
      async () => (await readFile(started, "utf8")).split("\n").filter(Boolean).length === 2,
      "the worker took two tasks",
      leaving.exited,
    );
    leaving.child.kill("SIGTERM");
    expect(await leaving.exited, leaving.stderr()).toBe(0);
    expect(leaving.stderr()).toContain("handed back 2 task(s) in flight");
    const workers = ["a", "b"].map((name) =>
      startCli(["worker", "-c", "recipe.yaml", "--concurrency", "2", "--name", name], dir),
    );
    expect(await driver.exited, driver.stderr()).toBe(0);
    await stopWorkers(workers);
    const rows = await metrics(dir);
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    // Handed back, not claimed: nothing waited for the claim time.
    expect(sum(rows, "workers/reclaimed")).toBe(0);
  });

  it("applies the failure policy to attempts that fail on the workers as in one process", async () => {
    const local = await runFolder(recipe(undefined, { policy: "continue" }));
    await drive(local);
    const expected = await metrics(local);
    // Run 0 of every group fails twice (one retry), then is skipped: 4 groups, 2 steps.
    expect(sum(expected, "rollout/failed")).toBe(8);
    expect(sum(expected, "rollout/skipped")).toBe(4);
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }, { policy: "continue" }));
    const worker = startCli(["worker", "-c", "recipe.yaml", "--concurrency", "3"], dir);
    await drive(dir);
    await stopWorkers([worker]);
    const rows = await metrics(dir);
    expect(rows.map(untimed)).toEqual(expected.map(untimed));
    // 12 rollouts that succeed, and the 4 failing ones twice each.
    expect(worker.stdout()).toContain("stopped after 20 task(s), 8 failed");
    const failures = (await readFile(join(dir, "out", "failures.jsonl"), "utf8")).trim().split("\n");
    expect(failures).toHaveLength(8);
    expect(failures[0]).toContain("worker crashed on row");
    expect(failures[0]).toContain("(on nexrl worker ");
  });

  it("stops the run when the policy says so, with the worker's error", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }, { policy: "stop_on_error" }));
    const worker = startCli(["worker", "-c", "recipe.yaml", "--concurrency", "3"], dir);
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
    expect(await driver.exited).toBe(3);
    expect(driver.stderr()).toMatch(
      /rollout of row \d+ \(group [\d-]+, run 0\) failed after 2 attempt\(s\): Error: worker crashed on row/,
    );
    await stopWorkers([worker]);
  });

  it("refuses workers of another recipe, exit 3 naming the differences, before they run a task; one with the driver's recipe runs them all", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }));
    // Another worker class (in another module) and another model.
    const early = startCli(
      [
        ...workerArgs("early"),
        `rollout_worker.custom_rollout_worker_module_path=${letter}`,
        "rollout_worker.custom_rollout_worker_class_name=LetterWorker",
        "service.train_service.model=small",
      ],
      dir,
    );
    await until(() => early.stdout().includes("rollout(s) at once"), "the worker started", early.exited);
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
    // It finds the difference in the first tasks it reads, and hands them back.
    expect(await early.exited, early.stderr()).toBe(3);
    expect(early.stderr()).toMatch(
      /nexrl: this worker's recipe does not match the run's driver \(stream prefix test\d+\): worker class LetterWorker \(module sha256 [0-9a-f]{12}…\) vs the driver's ScriptedWorker \(module sha256 [0-9a-f]{12}…\); model small vs the driver's tiny; tokenizer small vs the driver's tiny; start the worker with the driver's recipe\n/,
    );
    // Started while the driver runs: it is refused before it reads a task.
    const late = startCli([...workerArgs("late"), "service.train_service.model=small"], dir);
    expect(await late.exited, late.stderr()).toBe(3);
    expect(late.stderr()).toContain(": model small vs the driver's tiny; tokenizer small vs the driver's tiny; start");
    for (const refused of [early, late]) expect(refused.stdout()).not.toContain("stopped after");
    const good = startCli(workerArgs("good"), dir);
    expect(await driver.exited, driver.stderr()).toBe(0);
    await stopWorkers([good]);
    // Every task ran on the worker with the driver's recipe, once: the run in one process.
    expect((await metrics(dir)).map(untimed)).toEqual(baseline.map(untimed));
    expect(good.stdout()).toContain("stopped after 16 task(s), 0 failed");
  });

  it("says it waits for workers while none is connected, and stops at once on SIGTERM in that state", async () => {
    const dir = await runFolder(recipe({ url: redis.url, prefix: nextPrefix() }));
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
    // The runner sends 3 attempts at once (num_workers): they wait.
    await until(
      () => driver.stdout().includes("waiting for workers (0 connected, 3 tasks queued)"),
      "the driver said it waits",
      driver.exited,
    );
    driver.child.kill("SIGTERM");
    // One signal is enough: nothing would ever end the step.
    expect(await driver.exited, driver.stderr()).toBe(143);
    expect(driver.stdout()).toContain(
      "stopped while step 1's rollouts waited for workers and none was connected: the step is left unfinished",
    );
  });

  it("continues a killed driver with resume.mode=auto: no trajectory lost or doubled, the old session's tasks dropped", async () => {
    const prefix = nextPrefix();
    const dir = await runFolder(recipe({ url: redis.url, prefix }));
    const started = join(dir, "started.txt");
    await writeFile(started, "");
    // The first worker runs step 1 and then holds what it takes of step 2 until it is stopped.
    const first = startCli(workerArgs("first"), dir, { NEXRL_TEST_ROLE: "first-step" });
    await until(() => first.stdout().includes("rollout(s) at once"), "the worker started", first.exited);
    const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out", "trainer.save_freq=1"], dir);
    // Step 1 is checkpointed; the first worker hands back what it holds of step 2, and then only a
    // worker that never finishes is left, holding tasks of step 2.
    await until(() => driver.stdout().includes("step 1/2"), "step 1 ended", driver.exited);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    const stuck = startCli(workerArgs(), dir, { NEXRL_TEST_ROLE: "stall", NEXRL_TEST_STARTED: started });
    await until(
      async () => (await readFile(started, "utf8")).split("\n").filter(Boolean).length === 2,
      "the stuck worker took two tasks",
      stuck.exited,
    );
    const sessionKey = `${prefix}:session`;
    const oldSession = await client.get(sessionKey);
    driver.child.kill("SIGKILL");
    expect(await driver.exited).toBe("SIGKILL");
    // Its tasks go back to the stream, as tasks of a driver session that is over.
    stuck.child.kill("SIGTERM");
    expect(await stuck.exited).toBe(0);
    const resumed = startCli(
      ["-c", "recipe.yaml", "--run-nexrl", "-o", "out", "trainer.save_freq=1", "resume.mode=auto"],
      dir,
    );
    // The restarted driver is a new session: workers drop the tasks of the old one.
    await until(async () => (await client.get(sessionKey)) !== oldSession, "the new session", resumed.exited);
    const second = startCli(["worker", "-c", "recipe.yaml", "--concurrency", "2", "--name", "second"], dir);
    expect(await resumed.exited, resumed.stderr()).toBe(0);
    await stopWorkers([second]);
    expect(resumed.stdout()).toContain("step 2/2");
    const rows = await metrics(dir);
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    // The second worker ran step 2 only: its 8 tasks, none of the old session's (their entries are gone).
    expect(await client.xLen(`${prefix}:tasks`)).toBe(0);
    expect(second.stdout()).toContain("stopped after 8 task(s), 0 failed");
  }, 90_000);
});
