/**
 * The package as users get it: `npm pack` once, then
 * - the README's quickstart, its code blocks followed literally in an empty folder (`npm init -y`,
 *   so a CommonJS project) with `npm i nexrl` installing the tarball;
 * - a fresh ES-module project with the tarball installed;
 * - in both, a rollout worker and a recipe in TypeScript trained for two steps with `npx nexrl`
 *   on the local backend, and (ES module) SFT on a messages JSONL with a YAML recipe and no code (user modules load in the module system their package.json says), every
 *   entry point imported (the names each exports are those of its API report in `etc/`), and a
 *   user file type-checked against the installed declarations with `skipLibCheck: false`.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "..");

/** Whether npm runs here; the test is skipped, saying so, only when it does not. */
const npm = await run("npm", ["--version"]).then(
  ({ stdout }) => ({ ok: true as const, version: stdout.trim() }),
  (error: Error) => ({ ok: false as const, why: error.message }),
);
if (!npm.ok) console.warn(`skipped: the package install test needs npm, which does not run here (${npm.why})`);

/** A worker that records which module system loaded it, then rewards answers that start like the prompt. */
const WORKER = `import { writeFileSync } from "node:fs";
import { BaseRolloutWorker, Trajectory, type RolloutTask } from "nexrl";

// __filename exists in CommonJS modules only.
writeFileSync("loaded-as.txt", typeof __filename === "string" ? "commonjs" : "module");

export class EchoWorker extends BaseRolloutWorker {
  async rollout(task: RolloutTask) {
    const prompt = String(task.data.prompt);
    const { promptTokens, responseTokens, response, logprobs } = await this.inferenceClient.completion(prompt);
    return this.putTrajectory(
      new Trajectory({
        tokens: [...promptTokens, ...responseTokens],
        lossMask: [...promptTokens.map(() => 0), ...responseTokens.map(() => 1)],
        logprobs: [...promptTokens.map(() => 0), ...logprobs],
        reward: response.startsWith(prompt[0] ?? "") ? 1 : 0,
      }),
    );
  }
}
`;

/** A typed recipe: importing defineRecipe from "nexrl" goes through the same module system. */
const RECIPE = `import { defineRecipe } from "nexrl";

export default defineRecipe({
  experiment_name: "install_test",
  data: { data_files: ["data.jsonl"], batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 16 },
  rollout_worker: {
    type: "custom",
    custom_rollout_worker_module_path: "worker.ts",
    custom_rollout_worker_class_name: "EchoWorker",
    num_workers: 2,
    max_response_length: 4,
    max_sequence_length: 24,
  },
  trainer: { type: "remote_api_grpo", total_train_steps: 2 },
  service: { train_service: { backend: "local", model: "tiny", config: { loss_fn: "importance_sampling", learning_rate: 1e-3 } } },
});
`;

/** The entry points of the package, with the API report of each. */
const ENTRY_POINTS = [
  { specifier: "nexrl", report: "nexrl" },
  { specifier: "nexrl/wire", report: "nexrl-wire" },
  { specifier: "nexrl/backends", report: "nexrl-backends" },
  { specifier: "nexrl/algorithms", report: "nexrl-algorithms" },
  { specifier: "nexrl/agent", report: "nexrl-agent" },
  { specifier: "nexrl/runs", report: "nexrl-runs" },
  { specifier: "nexrl/errors", report: "nexrl-errors" },
  { specifier: "nexrl/engine", report: "nexrl-engine" },
  { specifier: "nexrl/server", report: "nexrl-server" },
  { specifier: "nexrl/testing", report: "nexrl-testing" },
];

/** The names of the values (classes, functions, constants) an API report says its entry point exports. */
async function reportedValues(report: string): Promise<string[]> {
  const text = await readFile(path.join(root, "etc", `${report}.api.md`), "utf8");
  const names = [...text.matchAll(/^export (?:abstract class|class|function|const|let) ([A-Za-z_$][\w$]*)/gm)];
  return [...new Set(names.map((m) => m[1]!))].sort();
}

/**
 * A user file of an ES-module project: a worker, a trainer and a recipe against the root, and a
 * use of each subpath, checked with skipLibCheck off (the declarations of nexrl and of the
 * dependencies its types import must compile).
 */
const TYPED_USER_ESM = `import {
  BaseRolloutWorker,
  BaseTrainer,
  Trajectory,
  defineRecipe,
  lossFunctions,
  runRecipe,
  type AgentFunction,
  type RolloutTask,
  type RunResult,
  type Tokenizer,
} from "nexrl";
import { adamParams, datum, type AdamParams, type Datum } from "nexrl/wire";
import { LocalTrainingService, type ModelInfo } from "nexrl/backends";
import { groupAdvantages, type GrpoTrainerOptions } from "nexrl/algorithms";
import { mergeCalls, type GatewayCall } from "nexrl/agent";
import { readRunFolder, type SampleRow } from "nexrl/runs";
import { StorageError } from "nexrl/errors";
import { LocalEngine, MODEL_PRESETS } from "nexrl/engine";
import { startServer, type RunningServer } from "nexrl/server";
import { rolloutTask, runRollout, workerSettings } from "nexrl/testing";

export class Worker extends BaseRolloutWorker<{ prompt: string; answer: string }> {
  async rollout(task: RolloutTask<{ prompt: string; answer: string }>): Promise<Trajectory> {
    const text: string = typeof task.prompt === "string" ? task.prompt : task.prompt.map((m) => m.content).join("\\n");
    const { promptTokens, responseTokens } = await this.inferenceClient.completion(text, {
      maxTokens: this.settings.maxResponseLength,
    });
    return new Trajectory({ tokens: [...promptTokens, ...responseTokens], lossMask: promptTokens.map(() => 0), reward: task.data.answer === "" ? 0 : 1 });
  }
}

export class Trainer extends BaseTrainer {
  protected prepareTrajectories(trajectories: Trajectory[]): Trajectory[] {
    for (const t of trajectories) t.advantage = t.reward * this.algorithm.learningRate;
    return trajectories;
  }
}

export const agent: AgentFunction = async (task, { openai, model }) => {
  const reply = await openai.chat.completions.create({ model, messages: [{ role: "user", content: String(task.prompt) }] });
  return { final_answer: reply.choices[0]?.message.content ?? "", reward: 1 };
};
export const adam: AdamParams = adamParams({ learningRate: 1e-3, weightDecay: 0.01, gradClipNorm: 1 });
export const settingsOf: typeof workerSettings = workerSettings;

export const recipe = defineRecipe({
  data: { data_files: ["data.jsonl"], batch_size: 2 },
  rollout_worker: { type: "custom", custom_rollout_worker_module_path: "typed-user.ts", custom_rollout_worker_class_name: "Worker" },
  trainer: { type: "remote_api_grpo", total_train_steps: 1 },
  service: { train_service: { backend: "local", model: "tiny" } },
});
export const ppoInputs: string[] = Object.keys(lossFunctions.ppo.inputs);
export const run: (path: string) => Promise<RunResult> = (p) => runRecipe(p);
export const presets: number = Object.keys(MODEL_PRESETS).length;
export const engine: typeof LocalEngine.create = LocalEngine.create;
export const serve: () => Promise<RunningServer> = () => startServer({ outputDir: "out" });
export const task: RolloutTask = rolloutTask({ prompt: "hi" });
export const rollout: typeof runRollout = runRollout;
export const one: Datum = datum([1, 2, 3], { weights: [0, 1, 1] });
export const local: (outputDir: string) => LocalTrainingService = (outputDir) => new LocalTrainingService({ outputDir });
export const info: (m: ModelInfo) => number | undefined = (m) => m.vocabSize;
export const advantages: number[] = groupAdvantages([new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1 })]).advantages;
export const grpo: GrpoTrainerOptions = {};
export const merged: (calls: GatewayCall[], tokenizer: Tokenizer) => number = (calls, tokenizer) =>
  mergeCalls(calls, tokenizer).sequences.length;
export const rows: (dir: string) => Promise<SampleRow[]> = async (dir) => (await readRunFolder(dir)).samples;
export const isStorage: (e: unknown) => boolean = (e) => e instanceof StorageError;
`;

/** The same for CommonJS code: \`import\` of the root compiles to \`require("nexrl")\`. */
const TYPED_USER_CJS = `import { Trajectory, defineRecipe, type RolloutTask } from "nexrl";

export const recipe = defineRecipe({
  data: { data_files: ["data.jsonl"] },
  rollout_worker: { type: "pig_latin" },
  trainer: { type: "remote_api_cross_entropy", total_train_steps: 1 },
  service: { train_service: { backend: "local", model: "tiny" } },
});
export function reward(task: RolloutTask): Trajectory {
  return new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: String(task.prompt).length });
}
`;

/** A tsconfig for a user project: strict, NodeNext, no skipLibCheck, Node's types from this checkout. */
function userTsconfig(files: string[], skipLibCheck = false): string {
  return JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      noEmit: true,
      skipLibCheck,
      types: ["node"],
      typeRoots: [path.join(root, "node_modules", "@types")],
    },
    files,
  });
}

/** Runs a command in a user project; never rejects. */
function runIn(
  cwd: string,
  command: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(command, args, { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME }, maxBuffer: 16 << 20 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

/**
 * The quickstart section of README.md as one shell script: its `sh` blocks as they are, and each
 * block whose first line names a file (`// worker.ts`, `# recipe.yaml`) written to that file.
 * `npm i nexrl` installs the tarball instead of the registry's version.
 */
async function quickstartScript(tarballPath: string): Promise<string> {
  const readme = await readFile(path.join(root, "README.md"), "utf8");
  const section = readme.split(/^## Quickstart\b.*$/m)[1]?.split(/^## /m)[0];
  if (section === undefined) throw new Error("README.md has no ## Quickstart section");
  const lines = ["set -euo pipefail"];
  for (const [, lang, body] of section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    const file = /^(?:\/\/|#) ([\w.-]+\.(?:ts|yaml))\n/.exec(body!)?.[1];
    if (file !== undefined) lines.push(`cat > ${file} <<'NEXRL_README_EOF'`, body!.trimEnd(), "NEXRL_README_EOF");
    else if (lang === "sh") lines.push(body!.trimEnd());
  }
  const script = lines.join("\n");
  if (!/^npm i nexrl$/m.test(script)) throw new Error("the README quickstart no longer says `npm i nexrl`");
  return script.replace(/^npm i nexrl$/m, `npm i --no-audit --no-fund --prefer-offline ${tarballPath}`);
}

const dirs: string[] = [];
let tarball = "";
/** The quickstart's folder (a CommonJS project, as `npm init -y` makes it) and how its script ended. */
let quickstart: Promise<{ dir: string; code: number; stdout: string; stderr: string }>;
/** A fresh ES-module project with the tarball installed (an error when installing failed). */
let esmProject: Promise<string | Error>;
/** What `npm install` of the tarball printed in that project. */
let installOutput = "";

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

beforeAll(async () => {
  if (!npm.ok) return;
  const packDir = await tempDir("nexrl-pack-");
  // `prepack` builds dist/ first, as for a publish, and keeps `prepare` out of the packed package.json.
  const { stdout } = await run("npm", ["pack", "--pack-destination", packDir], { cwd: root });
  tarball = path.join(packDir, stdout.trim().split("\n").at(-1)!);
  // Both installs start now and run side by side; each test waits for the one it needs.
  quickstart = (async () => {
    const empty = await tempDir("nexrl-readme-");
    const script = await quickstartScript(tarball);
    const result = await runIn(empty, "bash", ["-c", script]);
    return { dir: path.join(empty, "my-first-run"), ...result };
  })();
  esmProject = (async () => {
    const dir = await tempDir("nexrl-user-module-");
    const pkg = { name: "user-module", version: "1.0.0", private: true, type: "module" };
    await writeFile(path.join(dir, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
    const installed = await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], {
      cwd: dir,
    });
    installOutput = `${installed.stdout}\n${installed.stderr}`;
    return dir;
  })().catch((error: Error) => error);
}, 180_000);

afterAll(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** The folder of a project of `kind`, once its install has finished. */
async function project(kind: "commonjs" | "module"): Promise<string> {
  if (kind === "commonjs") {
    const result = await quickstart;
    expect(result.code, `the README quickstart failed:\n${result.stderr}`).toBe(0);
    return result.dir;
  }
  const dir = await esmProject;
  if (dir instanceof Error) throw dir;
  return dir;
}

describe.skipIf(!npm.ok)(`nexrl installed from its tarball (npm ${npm.ok ? npm.version : "missing"})`, () => {
  it("the README quickstart, followed literally in an empty folder, trains the tiny model to answer in vowels", async () => {
    const result = await quickstart;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("recipe ok");
    expect(result.stdout).toContain("done after step 30");
    const pkg = JSON.parse(await readFile(path.join(result.dir, "package.json"), "utf8")) as { type?: string };
    expect(pkg.type ?? "commonjs").toBe("commonjs");
    const metrics = (await readFile(path.join(result.dir, "runs", "first", "metrics.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    expect(metrics.map((m) => m.step)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    for (const m of metrics) expect(m["rollout/num_trajectories"]).toBe(16);
    // What the README says: about 0.02 at the first step; the model learns the reward.
    const first = metrics[0]!["rollout/reward_mean"]!;
    const last = metrics.at(-1)!["rollout/reward_mean"]!;
    expect(first).toBeLessThan(0.2);
    expect(last).toBeGreaterThan(0.8);
  }, 300_000);

  it("installs without a warning about an install script of nexrl's: the tarball has no prepare script", async () => {
    const dir = await project("module");
    const installed = JSON.parse(await readFile(path.join(dir, "node_modules", "nexrl", "package.json"), "utf8")) as {
      scripts?: Record<string, string>;
    };
    expect(Object.keys(installed.scripts ?? {})).not.toContain("prepare");
    expect(installOutput).not.toMatch(/nexrl@[^\s]* \(/);
    // The clone keeps it: `npm ci` there builds dist/.
    const own = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    };
    expect(own.scripts.prepare).toBe("npm run build");
  });

  for (const kind of ["commonjs", "module"] as const) {
    it.concurrent(
      `trains with a TypeScript worker and recipe in a fresh ${kind === "commonjs" ? 'CommonJS (no "type")' : "ES-module"} project`,
      async () => {
        const dir = await project(kind);
        const work = path.join(dir, "echo");
        await mkdir(work);
        await writeFile(path.join(work, "worker.ts"), WORKER);
        await writeFile(path.join(work, "recipe.ts"), RECIPE);
        const rows = ["abc", "bcd", "cde", "def"].map((prompt) => JSON.stringify({ prompt }));
        await writeFile(path.join(work, "data.jsonl"), `${rows.join("\n")}\n`);
        const result = await runIn(work, "npx", [
          "--no-install",
          "nexrl",
          "-m",
          "training-service",
          "-c",
          "recipe.ts",
          "--run-nexrl",
          "-o",
          "out",
        ]);
        expect(result.code, result.stderr).toBe(0);
        expect(result.stdout).toContain("done after step 2");
        expect(await readFile(path.join(work, "loaded-as.txt"), "utf8")).toBe(kind);
        const metrics = (await readFile(path.join(work, "out", "metrics.jsonl"), "utf8"))
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as Record<string, number>);
        expect(metrics.map((m) => m.step)).toEqual([1, 2]);
        for (const m of metrics) {
          expect(m["rollout/num_trajectories"]).toBe(4);
          expect(Number.isFinite(m["rollout/reward_mean"])).toBe(true);
        }
      },
      300_000,
    );
  }

  it.concurrent(
    "fine-tunes on the user's own messages JSONL with a YAML recipe and no code (rollout_worker.type: sft)",
    async () => {
      const dir = await project("module");
      const work = path.join(dir, "chat");
      await mkdir(work);
      const pairs = [
        ["hi", "hello there."],
        ["bye", "see you soon."],
        ["thanks", "you are welcome."],
        ["ping", "pong."],
      ];
      const rows = pairs.map(([user, assistant], i) => ({
        messages: [
          ...(i % 2 === 0 ? [{ role: "system", content: "Be polite." }] : []),
          { role: "user", content: user },
          { role: "assistant", content: assistant },
        ],
      }));
      const jsonl = (list: object[]) => `${list.map((row) => JSON.stringify(row)).join("\n")}\n`;
      await writeFile(path.join(work, "chat.jsonl"), jsonl(rows));
      await writeFile(path.join(work, "val.jsonl"), jsonl(rows.slice(0, 2)));
      await writeFile(
        path.join(work, "recipe.yaml"),
        [
          "data: {data_files: [chat.jsonl], batch_size: 4, prompt_key: messages, max_prompt_length: 48}",
          "rollout_worker: {type: sft, max_response_length: 24, max_sequence_length: 96}",
          "trainer: {type: remote_api_cross_entropy, total_train_steps: 20}",
          "validate: {validate_before_train: true, data: {data_files: [val.jsonl], prompt_key: messages}, eval: {validate_freq: 20}}",
          "service: {train_service: {backend: local, model: tiny, config: {loss_fn: cross_entropy, learning_rate: 1e-2}}}",
          "",
        ].join("\n"),
      );
      const checked = await runIn(work, "npx", ["--no-install", "nexrl", "validate", "-c", "recipe.yaml"]);
      expect(checked.code, checked.stderr).toBe(0);
      const result = await runIn(work, "npx", [
        "--no-install",
        "nexrl",
        "-m",
        "training-service",
        "-c",
        "recipe.yaml",
        "--run-nexrl",
        "-o",
        "out",
      ]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain("done after step 20");
      expect(result.stdout).toMatch(/validation at step 20: nll [\d.]+ per target token/);
      const metrics = (await readFile(path.join(work, "out", "metrics.jsonl"), "utf8"))
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, number>);
      const nll = metrics.filter((m) => typeof m["val/nll"] === "number").map((m) => m["val/nll"]!);
      expect(nll).toHaveLength(2);
      expect(nll[1]!).toBeLessThan(0.7 * nll[0]!);
      const samples = (await readFile(path.join(work, "out", "samples.jsonl"), "utf8"))
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { validation?: boolean; step: number; target?: string });
      expect(samples.filter((s) => s.validation).map((s) => [s.step, s.target])).toEqual([
        [0, "hello there."],
        [0, "see you soon."],
        [20, "hello there."],
        [20, "see you soon."],
      ]);
    },
    300_000,
  );

  it.concurrent(
    "every entry point imports with exactly the values its API report lists; require gives the root",
    async () => {
      const esm = await project("module");
      const script = `const out = {};
for (const s of ${JSON.stringify(ENTRY_POINTS.map((e) => e.specifier))}) out[s] = Object.keys(await import(s)).sort();
console.log(JSON.stringify(out));`;
      const imported = await runIn(esm, process.execPath, ["--input-type=module", "-e", script]);
      expect(imported.code, imported.stderr).toBe(0);
      const names = JSON.parse(imported.stdout) as Record<string, string[]>;
      for (const entry of ENTRY_POINTS)
        expect(names[entry.specifier], entry.specifier).toEqual(await reportedValues(entry.report));
      // Only the documented entry points resolve: internals stay unreachable.
      const internal = await runIn(esm, process.execPath, [
        "--input-type=module",
        "-e",
        'await import("nexrl/dist/http/transport.js")',
      ]);
      expect(internal.code).not.toBe(0);
      expect(internal.stderr).toContain("ERR_PACKAGE_PATH_NOT_EXPORTED");

      const cjs = await project("commonjs");
      const required = await runIn(cjs, process.execPath, [
        "-e",
        'console.log(JSON.stringify(Object.keys(require("nexrl")).sort()))',
      ]);
      expect(required.code, required.stderr).toBe(0);
      expect(JSON.parse(required.stdout)).toEqual(await reportedValues("nexrl"));
    },
    300_000,
  );

  it.concurrent(
    "user files type-check against the installed declarations with skipLibCheck: false (ESM and CommonJS)",
    async () => {
      const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");
      const esm = await project("module");
      await writeFile(path.join(esm, "typed-user.ts"), TYPED_USER_ESM);
      await writeFile(path.join(esm, "tsconfig.json"), userTsconfig(["typed-user.ts"]));
      const cjs = await project("commonjs");
      await writeFile(path.join(cjs, "typed-user.ts"), TYPED_USER_CJS);
      // The quickstart's worker is checked too, as a user's editor would.
      await writeFile(path.join(cjs, "tsconfig.json"), userTsconfig(["typed-user.ts", "worker.ts"]));
      const checks = await Promise.all(
        [esm, cjs].map((dir) => runIn(dir, process.execPath, [tsc, "-p", "tsconfig.json"])),
      );
      for (const [i, checked] of checks.entries()) {
        expect(checked.stdout + checked.stderr, i === 0 ? "ES module" : "CommonJS").toBe("");
        expect(checked.code).toBe(0);
      }
      // The check can fail: a wrong type is reported (libraries skipped here: the user file is the point).
      await writeFile(
        path.join(esm, "wrong.ts"),
        'import { Trajectory } from "nexrl";\nexport const t: Trajectory = "not a trajectory";\n',
      );
      await writeFile(path.join(esm, "tsconfig.wrong.json"), userTsconfig(["wrong.ts"], true));
      const wrong = await runIn(esm, process.execPath, [tsc, "-p", "tsconfig.wrong.json"]);
      expect(wrong.code).not.toBe(0);
      expect(wrong.stdout).toContain("TS2322");
    },
    300_000,
  );
});
