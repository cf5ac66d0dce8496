/** Shared fixtures of the tests of what comes after a run: real runs in temporary folders, and the real CLI. */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { RunResult } from "../../src/outputs/events.js";

/** The checkout's root. */
export const root = resolve(import.meta.dirname, "../..");
/** The pig latin recipe every run here trains. */
export const pigLatinRecipe = join(root, "recipe/pig_latin/local.yaml");

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A fresh temporary folder, removed after the test. */
export async function tempDir(prefix = "nexrl-after-run-"): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** Overrides that fit the pig latin recipe to the `tiny` preset (context 128) and a few steps. */
export function pigLatinOverrides(options: { steps: number; saveFreq: number; validateFreq: number }): string[] {
  return [
    "service.train_service.model=tiny",
    `trainer.total_train_steps=${options.steps}`,
    `trainer.save_freq=${options.saveFreq}`,
    `validate.eval.validate_freq=${options.validateFreq}`,
    "rollout_worker.max_sequence_length=128",
    "rollout_worker.max_response_length=60",
    "data.max_prompt_length=60",
    "validate.data.max_prompt_length=60",
  ];
}

/** A short pig latin run of the tiny preset into `outputDir`, in this process. */
export function pigLatinRun(
  outputDir: string,
  options: { steps: number; saveFreq: number; validateFreq: number },
): Promise<RunResult> {
  return runRecipe(pigLatinRecipe, { outputDir, overrides: pigLatinOverrides(options), env: {}, cwd: root });
}

/** What a finished child process printed. */
export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI (`node dist/cli/main.js ARGS`) to its end, with `input` on its standard input. */
export function runNexrl(
  args: readonly string[],
  options: { input?: string; env?: Record<string, string | undefined>; cwd?: string } = {},
): Promise<ChildResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [join(root, "dist/cli/main.js"), ...args], {
      cwd: options.cwd ?? root,
      env: options.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(options.input ?? "");
  });
}

/** Starts `nexrl serve ARGS` and resolves with its URL once it listens. */
export function startServe(args: readonly string[]) {
  const child = spawn(process.execPath, [join(root, "dist/cli/main.js"), "serve", "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const url = new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (match && stdout.includes("stop with Ctrl-C")) resolve(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`nexrl serve exited ${code}: ${stderr}`)));
  });
  return { child, url, exited, output: () => stdout, errors: () => stderr };
}
