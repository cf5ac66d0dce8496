/**
 * Shared parts of the run-level robustness tests: a user project in a temporary folder (its own
 * package.json, nexrl installed as a link to this checkout), small recipes on the tiny engine,
 * and child processes of the built CLI (`dist/cli/main.js`, built by `npm test`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach } from "vitest";

/** The repository root. */
export const ROOT = resolve(import.meta.dirname, "../..");
/** The built CLI. */
export const CLI = join(ROOT, "dist/cli/main.js");

const dirs: string[] = [];
const fileDirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(fileDirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});
afterEach(async () => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A fresh temporary folder, removed after the test (or, with `keep: "file"`, after the test file). */
export async function tempDir(keep: "test" | "file" = "test"): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-robust-"));
  (keep === "test" ? dirs : fileDirs).push(dir);
  return dir;
}

/**
 * A user project: an ESM package.json, `node_modules/nexrl` linking to this checkout (so that
 * `import … from "nexrl"` loads the same dist/ as the CLI), and `train.jsonl` with `rows` rows.
 */
export async function userProject(rows = 8, keep: "test" | "file" = "test"): Promise<string> {
  const dir = await tempDir(keep);
  await writeFile(join(dir, "package.json"), `${JSON.stringify({ name: "user-project", type: "module" })}\n`);
  await mkdir(join(dir, "node_modules"));
  await symlink(ROOT, join(dir, "node_modules", "nexrl"), "dir");
  await symlink(join(ROOT, "node_modules", "openai"), join(dir, "node_modules", "openai"), "dir");
  const lines = Array.from({ length: rows }, (_, i) => JSON.stringify({ prompt: `p${i} ab` }));
  await writeFile(join(dir, "train.jsonl"), `${lines.join("\n")}\n`);
  return dir;
}

/**
 * A rollout worker module `worker.ts` (class `W`) whose `rollout(task)` body is `body`; the
 * default body returns a short SFT trajectory of the row's prompt with reward 1, and `ok(task)`
 * builds that trajectory for a custom body.
 */
export async function writeWorker(dir: string, body = "return this.ok(task);", name = "worker.ts"): Promise<string> {
  await writeFile(
    join(dir, name),
    `import { BaseRolloutWorker, type RolloutTask } from "nexrl";
export class W extends BaseRolloutWorker {
  ok(task: RolloutTask) {
    const p = this.tokenizer.encode(String(task.prompt), { addBos: true });
    return { tokens: [...p, 97, this.tokenizer.eosId], lossMask: [...p.map(() => 0), 1, 1], reward: 1 };
  }
  async rollout(task: RolloutTask): Promise<unknown> {
    ${body}
  }
}
`,
  );
  return join(dir, name);
}

/** A recipe `recipe.yaml` in `dir`: SFT on the tiny engine with the worker of {@link writeWorker}; `extra` is appended YAML. */
export async function writeRecipe(dir: string, extra = "", name = "recipe.yaml"): Promise<string> {
  await writeFile(
    join(dir, name),
    `data:
  data_files: [train.jsonl]
  batch_size: 2
  seed: 7
  max_prompt_length: 16
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: worker.ts
  custom_rollout_worker_class_name: W
  num_workers: 2
  max_response_length: 8
  max_sequence_length: 64
trainer:
  type: remote_api_cross_entropy
  total_train_steps: 3
service:
  train_service:
    backend: local
    model: tiny
    config:
      loss_fn: cross_entropy
      learning_rate: 0.01
${extra}`,
  );
  return join(dir, name);
}

/** Trains the recipe of {@link writeRecipe} in `dir` with class `className` of `dir/trainer.ts` as the trainer. */
export function runWithTrainer(dir: string, className: string): Promise<ChildResult> {
  const trainer = [
    "trainer.type=custom",
    "trainer.custom_trainer_module_path=trainer.ts",
    `trainer.custom_trainer_class_name=${className}`,
  ];
  return runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "out"), ...trainer], { cwd: dir });
}

/** What a finished child process did. */
export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running CLI child process. */
export interface CliChild {
  child: ChildProcess;
  /** Output so far. */
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when `text` has appeared on stdout. */
  waitFor(text: string | RegExp): Promise<void>;
  /** Resolves when the process has exited. */
  done: Promise<ChildResult>;
}

/** Starts `node dist/cli/main.js ...args` in `cwd`. */
export function startCli(
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string>; uid?: number; gid?: number },
): CliChild {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? options.cwd, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.uid !== undefined && { uid: options.uid }),
    ...(options.gid !== undefined && { gid: options.gid }),
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  const waiters: Array<{ text: string | RegExp; resolve: () => void }> = [];
  const seen = (text: string | RegExp): boolean =>
    typeof text === "string" ? stdout.includes(text) : text.test(stdout);
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk;
    for (const w of [...waiters])
      if (seen(w.text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  });
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk));
  const done = new Promise<ChildResult>((resolveDone) =>
    child.on("close", (code) => resolveDone({ code, stdout, stderr })),
  );
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    waitFor: (text) =>
      new Promise<void>((resolveWait, reject) => {
        if (seen(text)) return resolveWait();
        waiters.push({ text, resolve: resolveWait });
        void done.then(() =>
          reject(new Error(`the CLI exited before printing ${String(text)}:\n${stdout}\n${stderr}`)),
        );
      }),
    done,
  };
}

/** Runs `node dist/cli/main.js ...args` in `cwd` to its end. */
export function runCliChild(
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string>; uid?: number; gid?: number },
): Promise<ChildResult> {
  return startCli(args, options).done;
}

/** The rows of a JSON Lines file. */
export async function readJsonl<T = Record<string, unknown>>(path: string): Promise<T[]> {
  const text = await readFile(path, "utf8");
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as T);
}
