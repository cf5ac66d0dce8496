/**
 * The package as users get it: `npm pack`, installed into a fresh CommonJS project (a plain
 * `npm init` folder) and a fresh ES-module project, each with a rollout worker and a recipe in
 * TypeScript, trained for two steps with `npx nexrl` on the local backend. User modules load in
 * the module system their package.json says.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
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

const dirs: string[] = [];
let tarball = "";

beforeAll(async () => {
  if (!npm.ok) return;
  const packDir = await mkdtemp(path.join(tmpdir(), "nexrl-pack-"));
  dirs.push(packDir);
  // `prepare` builds dist/ first, as for a publish.
  const { stdout } = await run("npm", ["pack", "--pack-destination", packDir], { cwd: root });
  tarball = path.join(packDir, stdout.trim().split("\n").at(-1)!);
}, 180_000);

afterAll(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe.skipIf(!npm.ok)(`nexrl installed from its tarball (npm ${npm.ok ? npm.version : "missing"})`, () => {
  for (const kind of ["commonjs", "module"] as const) {
    it.concurrent(
      `trains with a TypeScript worker and recipe in a fresh ${kind === "commonjs" ? 'CommonJS (no "type")' : "ES-module"} project`,
      async () => {
        const project = await mkdtemp(path.join(tmpdir(), `nexrl-user-${kind}-`));
        dirs.push(project);
        const pkg = {
          name: `user-${kind}`,
          version: "1.0.0",
          private: true,
          ...(kind === "module" && { type: "module" }),
        };
        await writeFile(path.join(project, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
        await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: project });
        await writeFile(path.join(project, "worker.ts"), WORKER);
        await writeFile(path.join(project, "recipe.ts"), RECIPE);
        const rows = ["abc", "bcd", "cde", "def"].map((prompt) => JSON.stringify({ prompt }));
        await writeFile(path.join(project, "data.jsonl"), `${rows.join("\n")}\n`);
        const result = await run(
          "npx",
          ["--no-install", "nexrl", "-m", "training-service", "-c", "recipe.ts", "--run-nexrl", "-o", "out"],
          { cwd: project, env: { PATH: process.env.PATH, HOME: process.env.HOME } },
        ).then(
          ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
          (error: { code: number; stdout: string; stderr: string }) => error,
        );
        expect(result.code, result.stderr).toBe(0);
        expect(result.stdout).toContain("done after step 2");
        expect(await readFile(path.join(project, "loaded-as.txt"), "utf8")).toBe(kind);
        const metrics = (await readFile(path.join(project, "out", "metrics.jsonl"), "utf8"))
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
});
