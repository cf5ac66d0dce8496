/**
 * One stage of a learning benchmark: the built CLI training one shipped recipe, as a user types
 * it in a fresh folder (`nexrl -m training-service -c RECIPE --run-nexrl --tag TAG`), timed from
 * spawn to exit, with the rows it wrote to `runs/TAG/`.
 */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const CLI = path.join(root, "dist", "cli", "main.js");

/** A row of `metrics.jsonl`. */
export type MetricsRow = Record<string, number>;

/** What a stage did. */
export interface StageResult {
  /** The recipe, relative to the repository root. */
  recipe: string;
  /** The run's tag: it wrote to `runs/<tag>/` under the stage's folder. */
  tag: string;
  /** The command, as a user would type it in a checkout. */
  command: string;
  /** Wall time from spawn to exit, in seconds. */
  seconds: number;
  /** The 1-minute load average when it started and when it ended. */
  load: { before: number; after: number };
  /** Its rows of `metrics.jsonl`. */
  metrics: MetricsRow[];
  /** The run folder. */
  runDir: string;
}

/** Reads a JSON Lines file. */
export async function readJsonl<T>(file: string): Promise<T[]> {
  const text = await readFile(file, "utf8");
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as T);
}

/**
 * Runs `recipe` (relative to the repository root) with the built CLI in `cwd`, so that its run
 * folder is `cwd/runs/<tag>` as in a fresh checkout; its output goes to `cwd/<tag>.log`.
 * `NEXRL_STORAGE_PATH` is removed from the environment, so that the recipes' default paths apply.
 * @throws when the CLI exits with another code than 0 (the message has the end of its output).
 */
export async function runStage(cwd: string, recipe: string, tag: string): Promise<StageResult> {
  const args = [CLI, "-m", "training-service", "-c", path.join(root, recipe), "--run-nexrl", "--tag", tag];
  const env = { ...process.env };
  delete env.NEXRL_STORAGE_PATH;
  const log = path.join(cwd, `${tag}.log`);
  const out = createWriteStream(log);
  const before = os.loadavg()[0]!;
  const t0 = performance.now();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    child.on("error", reject);
    child.on("close", resolve);
  });
  const seconds = (performance.now() - t0) / 1000;
  await new Promise<void>((resolve) => out.end(resolve));
  if (code !== 0) {
    const tail = (await readFile(log, "utf8")).split("\n").slice(-15).join("\n");
    throw new Error(`${recipe} (tag ${tag}) exited with code ${code}; the end of ${log}:\n${tail}`);
  }
  const runDir = path.join(cwd, "runs", tag);
  return {
    recipe,
    tag,
    command: `nexrl -m training-service -c ${recipe} --run-nexrl --tag ${tag}`,
    seconds,
    load: { before, after: os.loadavg()[0]! },
    metrics: await readJsonl<MetricsRow>(path.join(runDir, "metrics.jsonl")),
    runDir,
  };
}

/** The mean of `key` over `rows` that have it. */
export function meanOf(rows: readonly MetricsRow[], key: string): number {
  const values = rows.map((row) => row[key]).filter((v): v is number => typeof v === "number");
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** `key` (default `rollout/reward_mean`) over the first and the last `n` training steps, and the gain between them. */
export function rewardGain(
  rows: readonly MetricsRow[],
  n = 5,
  key = "rollout/reward_mean",
): { first: number; last: number; gain: number } {
  const steps = rows.filter((row) => row.step! > 0 && typeof row[key] === "number");
  const first = meanOf(steps.slice(0, n), key);
  const last = meanOf(steps.slice(-n), key);
  return { first, last, gain: last - first };
}

/** `[step, value]` of every row that has `key` (e.g. the validation curve). */
export function curve(rows: readonly MetricsRow[], key: string): Array<[number, number]> {
  return rows
    .filter((row) => typeof row[key] === "number")
    .map((row) => [row.step!, Math.round(row[key]! * 1000) / 1000]);
}

/**
 * The warm start a run made with `init.from_recipe` (its `run.json` names the checkpoint it
 * started from): that run's folder, steps and final `train/loss`; null for a run without one.
 */
export async function warmStartOf(
  runDir: string,
): Promise<{ runDir: string; steps: number; final_loss: number | undefined } | null> {
  const { sessions } = JSON.parse(await readFile(path.join(runDir, "run.json"), "utf8")) as {
    sessions: Array<{ start: string; from?: string }>;
  };
  const from = sessions[0]?.start === "warm_start" ? sessions[0].from : undefined;
  if (from === undefined) return null;
  const warmDir = path.resolve(path.dirname(from), "..");
  const rows = await readJsonl<MetricsRow>(path.join(warmDir, "metrics.jsonl"));
  return { runDir: warmDir, steps: rows.length, final_loss: rows.at(-1)?.["train/loss"] };
}
