/**
 * Distributed rollouts with the driver and the `nexrl worker` loops in the test process: the same
 * paths as run.test.ts (which runs them as CLI processes), here where coverage sees them.
 */
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { WorkerCommand } from "../../src/cli/args.js";
import type { CliIO } from "../../src/cli/io.js";
import { runWorker } from "../../src/cli/worker.js";
import { ConfigError, DistributedError } from "../../src/errors.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { loadRecipe } from "../../src/recipe/load.js";
import { additionRows, fixture, grpoRecipeYaml, tempDir, writeJsonl } from "../support/pipeline.js";
import { heldTasks, playInProcess } from "./fixtures/scripted-worker.js";
import { redisAvailable, startRedis, type TestRedis } from "./redis-server.js";

type Row = Record<string, number>;

/** The worker of the recipes here (every worker of a run has the driver's recipe); the part it plays is picked per process. */
const scripted = fileURLToPath(new URL("./fixtures/scripted-worker.ts", import.meta.url));

/**
 * The seeded recipe of run.test.ts; `url` adds `rollout_worker.distributed` (stream prefix
 * `prefix`), `failing` the worker whose run 0 of every group fails, one retry and the
 * `continue` policy.
 */
function recipe(url?: string, prefix = "nexrl", failing = false): string {
  let yaml = grpoRecipeYaml({
    steps: 2,
    ...(failing
      ? {
          worker: fixture("failing-worker.ts"),
          className: "FailingWorker",
          extra: "runtime_monitor:\n  exception_handling:\n    policy: continue\n",
        }
      : { worker: scripted, className: "ScriptedWorker" }),
  });
  if (failing)
    yaml = yaml.replace("  max_sequence_length: 64\n", "  max_sequence_length: 64\n  max_rollout_retries: 1\n");
  if (!url) return yaml;
  return yaml.replace(
    "  max_sequence_length: 64\n",
    `  max_sequence_length: 64\n  distributed:\n    engine: redis\n    url: ${url}\n    stream_prefix: ${prefix}\n    claim_idle_ms: 4000\n    heartbeat_ms: 200\n`,
  );
}

/** A folder with `train.jsonl`, `recipe.yaml` (distributed when `url` is given) and `plain.yaml` (never). */
async function runFolder(url?: string, prefix?: string, failing = false): Promise<string> {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(8));
  await writeFile(join(dir, "recipe.yaml"), recipe(url, prefix, failing));
  await writeFile(join(dir, "plain.yaml"), recipe(undefined, prefix, failing));
  return dir;
}

/** Runs `recipe.yaml` of `dir` in this process; its metrics rows. */
async function drive(dir: string): Promise<Row[]> {
  const result = await runRecipe(join(dir, "recipe.yaml"), {
    outputDir: join(dir, "out"),
    env: {},
    cwd: dir,
    progress: false,
  });
  expect(result.steps).toBe(2);
  return result.metrics as Row[];
}

/** A metrics row without `time/*` and `workers/*`. */
function untimed(row: Row): Row {
  return Object.fromEntries(
    Object.entries(row).filter(([key]) => !key.startsWith("time/") && !key.startsWith("workers/")),
  );
}

/** A CliIO that keeps what is written. */
function io(cwd: string): CliIO & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
    env: {},
    cwd,
    version: "0.0.0-test",
  };
}

const load = (dir: string) => (path: string, overrides: string[]) => loadRecipe(path, { cwd: dir, env: {}, overrides });

describe.skipIf(!redisAvailable)("distributed rollouts in one process (redis-server, runRecipe, runWorker)", () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  // A test that failed while its workers held tasks leaves none holding for the next.
  afterEach(() => playInProcess(undefined));

  it("gives the metrics of the run without distributed, with two in-process workers taking every task", async () => {
    const baseline = await drive(await runFolder());
    const dir = await runFolder(redis.url);
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    // One worker reads the recipe's settings, the other a recipe without them and --redis.
    const outputs = [io(dir), io(dir)];
    const workers = [
      runWorker(
        { kind: "worker", configPath: "recipe.yaml", overrides: [], concurrency: 2, name: "a" },
        outputs[0]!,
        load(dir),
        stopped,
      ),
      runWorker(
        { kind: "worker", configPath: "plain.yaml", overrides: [], redis: redis.url, concurrency: 2, name: "b" },
        outputs[1]!,
        load(dir),
        stopped,
      ),
    ];
    for (const output of outputs)
      await expect.poll(() => output.out.join(""), { timeout: 60_000 }).toMatch(/2 rollout\(s\) at once/);
    const rows = await drive(dir);
    stop();
    expect(await Promise.all(workers)).toEqual([0, 0]);
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    expect(rows.map((row) => row["workers/alive"])).toEqual([2, 2]);
    expect(rows.map((row) => row["workers/reclaimed"])).toEqual([0, 0]);
    expect(rows.map((row) => row["workers/duplicates"])).toEqual([0, 0]);
    expect(rows.map((row) => row["workers/failures"])).toEqual([0, 0]);
    // 2 steps of 2 rows × 4 copies: 16 tasks, each run once by one of the workers, each step's
    // counted in that step's row (from the results the driver read, not the workers' heartbeats).
    expect(rows.map((row) => row["workers/tasks"])).toEqual([8, 8]);
    const finished = outputs.map((output) =>
      Number(/stopped after (\d+) task\(s\), 0 failed/.exec(output.out.join(""))?.[1]),
    );
    expect(finished.reduce((a, b) => a + b, 0)).toBe(16);
    expect(outputs[0]!.out.join("")).toContain("from 127.0.0.1:");
    expect(outputs.map((output) => output.err.join(""))).toEqual([
      expect.stringContaining("stopping: no more tasks"),
      expect.stringContaining("stopping: no more tasks"),
    ]);
  });

  it("applies the failure policy to attempts that fail on an in-process worker as in one process", async () => {
    const expected = await drive(await runFolder(undefined, undefined, true));
    const dir = await runFolder(redis.url, "failing", true);
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const output = io(dir);
    const worker = runWorker(
      { kind: "worker", configPath: "recipe.yaml", overrides: [], concurrency: 3, name: "f" },
      output,
      load(dir),
      stopped,
    );
    await expect.poll(() => output.out.join(""), { timeout: 60_000 }).toMatch(/3 rollout\(s\) at once/);
    const rows = await drive(dir);
    stop();
    expect(await worker).toBe(0);
    // Run 0 of every group fails twice (one retry), then is skipped: 4 groups, 2 steps.
    expect(rows.reduce((total, row) => total + (row["rollout/failed"] ?? 0), 0)).toBe(8);
    expect(rows.reduce((total, row) => total + (row["rollout/skipped"] ?? 0), 0)).toBe(4);
    expect(rows.map(untimed)).toEqual(expected.map(untimed));
    // Each step: 6 rollouts that succeed, and the 2 failing ones twice each.
    expect(rows.map((row) => [row["workers/tasks"], row["workers/failures"]])).toEqual([
      [10, 4],
      [10, 4],
    ]);
    // 12 rollouts that succeed, and the 4 failing ones twice each.
    expect(output.out.join("")).toContain("stopped after 20 task(s), 8 failed");
  });

  it("hands back the tasks in flight of a worker told to stop; another worker runs them, each counted once", async () => {
    const baseline = await drive(await runFolder());
    const dir = await runFolder(redis.url, "handback");
    heldTasks().length = 0;
    playInProcess("hold");
    let stopLeaving!: () => void;
    const leavingStopped = new Promise<void>((resolve) => (stopLeaving = resolve));
    const leavingOutput = io(dir);
    const leaving = runWorker(
      {
        kind: "worker",
        configPath: "recipe.yaml",
        overrides: [],
        concurrency: 2,
        name: "leaving",
      },
      leavingOutput,
      load(dir),
      leavingStopped,
    );
    await expect.poll(() => leavingOutput.out.join(""), { timeout: 60_000 }).toMatch(/2 rollout\(s\) at once/);
    const driving = drive(dir);
    // It holds two tasks it will never finish; then it is told to stop.
    await expect.poll(() => heldTasks().length, { timeout: 60_000 }).toBe(2);
    stopLeaving();
    expect(await leaving).toBe(0);
    expect(leavingOutput.err.join("")).toContain("handed back 2 task(s) in flight");
    expect(leavingOutput.out.join("")).toContain("stopped after 0 task(s), 0 failed");
    playInProcess(undefined);
    let stopOther!: () => void;
    const otherStopped = new Promise<void>((resolve) => (stopOther = resolve));
    const otherOutput = io(dir);
    const other = runWorker(
      { kind: "worker", configPath: "recipe.yaml", overrides: [], concurrency: 2, name: "other" },
      otherOutput,
      load(dir),
      otherStopped,
    );
    const rows = await driving;
    stopOther();
    expect(await other).toBe(0);
    // Every task, the two handed back included, ran on the other worker, once: the run's
    // trajectories are those of the run in one process.
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
    expect(otherOutput.out.join("")).toContain("stopped after 16 task(s), 0 failed");
    expect(rows.reduce((total, row) => total + row["workers/tasks"]!, 0)).toBe(16);
    // Handed back, not claimed after the claim time; and no result came twice.
    expect(rows.map((row) => row["workers/reclaimed"])).toEqual([0, 0]);
    expect(rows.map((row) => row["workers/duplicates"])).toEqual([0, 0]);
    expect(heldTasks()).toHaveLength(2);
  });

  it("samples as the driver's tasks say, whatever the worker's own recipe sets", async () => {
    const baseline = await drive(await runFolder());
    const dir = await runFolder(redis.url, "sampling");
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const output = io(dir);
    // A worker whose recipe samples shorter and colder than the driver's.
    const overrides = ["rollout_worker.max_response_length=3", "rollout_worker.temperature=0.1"];
    const worker = runWorker(
      { kind: "worker", configPath: "recipe.yaml", overrides, concurrency: 3, name: "other" },
      output,
      load(dir),
      stopped,
    );
    await expect.poll(() => output.out.join(""), { timeout: 60_000 }).toMatch(/3 rollout\(s\) at once/);
    const rows = await drive(dir);
    stop();
    expect(await worker).toBe(0);
    expect(rows.map(untimed)).toEqual(baseline.map(untimed));
  });

  it("refuses a run whose Redis server cannot be reached before it writes its folder", async () => {
    // Nothing listens on the port after a server that was stopped.
    const gone = await startRedis();
    await gone.stop();
    const dir = await runFolder(gone.url);
    const error = await drive(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DistributedError);
    expect((error as Error).message).toContain(`the Redis server 127.0.0.1:${gone.port} failed`);
    expect((error as Error).message).toContain("check that redis-server runs there");
    expect(existsSync(join(dir, "out"))).toBe(false);
  });

  it("refuses a recipe without rollout_worker.distributed and no --redis, and a --redis that is not a Redis URL", async () => {
    const dir = await runFolder();
    const command: WorkerCommand = { kind: "worker", configPath: "recipe.yaml", overrides: [] };
    await expect(runWorker(command, io(dir), load(dir))).rejects.toThrow(
      /has no rollout_worker\.distributed and no --redis URL was given/,
    );
    const bad = runWorker({ ...command, redis: "http://127.0.0.1:1" }, io(dir), load(dir));
    await expect(bad).rejects.toBeInstanceOf(ConfigError);
    await expect(bad).rejects.toThrow(/^--redis: not a Redis URL/);
  });
});
