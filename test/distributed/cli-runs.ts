/**
 * The distributed runs of the CLI tests: the seeded recipe (with `rollout_worker.distributed` when
 * given a server), its folder, its metrics, and the driver and `nexrl worker` processes.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { additionRows, fixture, grpoRecipeYaml, tempDir, writeJsonl } from "../support/pipeline.js";
import { startCli, type CliProcess } from "./cli.js";

/** The worker of the recipes here; the part it plays is picked per process (see the fixture). */
const scripted = fileURLToPath(new URL("./fixtures/scripted-worker.ts", import.meta.url));

/** `nexrl worker` arguments for a worker of 2 rollouts at once with the run's recipe. */
export function workerArgs(name?: string): string[] {
  return ["worker", "-c", "recipe.yaml", "--concurrency", "2", ...(name ? ["--name", name] : [])];
}

/** Settings of the failure tests: the failing worker, a retry, and the `continue` policy unless `stop`. */
export interface FailureSettings {
  policy: "continue" | "stop_on_error";
}

/**
 * The recipe of a run here, with the scripted worker; `distributed` adds the key, `failing` the
 * failing worker instead (run 0 of every group fails).
 */
export function recipe(distributed?: { url: string; prefix: string }, failing?: FailureSettings): string {
  let yaml = grpoRecipeYaml({
    steps: 2,
    ...(failing
      ? {
          worker: fixture("failing-worker.ts"),
          className: "FailingWorker",
          extra: `runtime_monitor:\n  exception_handling:\n    policy: ${failing.policy}\n`,
        }
      : { worker: scripted, className: "ScriptedWorker" }),
  });
  if (failing)
    yaml = yaml.replace("  max_sequence_length: 64\n", "  max_sequence_length: 64\n  max_rollout_retries: 1\n");
  if (!distributed) return yaml;
  return yaml.replace(
    "  max_sequence_length: 64\n",
    `  max_sequence_length: 64
  distributed:
    engine: redis
    url: ${distributed.url}
    stream_prefix: ${distributed.prefix}
    claim_idle_ms: 4000
    heartbeat_ms: 1000
`,
  );
}

/** A folder with `train.jsonl` and `recipe.yaml`. */
export async function runFolder(yaml: string): Promise<string> {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(8));
  await writeFile(join(dir, "recipe.yaml"), yaml);
  return dir;
}

export type Row = Record<string, number>;

export async function metrics(dir: string): Promise<Row[]> {
  const text = await readFile(join(dir, "out", "metrics.jsonl"), "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Row);
}

/** A metrics row without what depends on timing or on the workers (`time/*`, `workers/*`). */
export function untimed(row: Row): Row {
  return Object.fromEntries(
    Object.entries(row).filter(([key]) => !key.startsWith("time/") && !key.startsWith("workers/")),
  );
}

export const sum = (rows: Row[], key: string): number => rows.reduce((total, row) => total + (row[key] ?? 0), 0);

/** Runs the driver to its end. */
export async function drive(dir: string): Promise<CliProcess> {
  const driver = startCli(["-c", "recipe.yaml", "--run-nexrl", "-o", "out"], dir);
  const code = await driver.exited;
  expect(code, driver.stderr()).toBe(0);
  return driver;
}

/** Stops `workers` with SIGTERM; each exits 0. */
export async function stopWorkers(workers: CliProcess[]): Promise<void> {
  for (const worker of workers) worker.child.kill("SIGTERM");
  for (const worker of workers) expect(await worker.exited, worker.stderr()).toBe(0);
}
