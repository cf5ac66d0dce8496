import { mkdir, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { pigLatinRecipe, root, runNexrl, tempDir } from "../support/runs.js";

const mathRecipe = join(root, "recipe/math/local.yaml");
const agentToolsRecipe = join(root, "recipe/agent_tools/local.yaml");

/** The problem lines (`  - key: message`) of a refused recipe. */
const problems = (stderr: string): string[] =>
  stderr
    .split("\n")
    .filter((line) => line.startsWith("  - "))
    .map((line) => line.slice(4));

describe("nexrl validate (the built CLI)", () => {
  it("refuses an unsupported logger and keys nothing would read, naming each with what to do", async () => {
    const dir = await tempDir();
    const recipe = join(dir, "ported.yaml");
    await writeFile(
      recipe,
      [
        `defaults: [${pigLatinRecipe}, _self_]`,
        "logger: {backend: [console, swanlab]}",
        "rollout_worker: {save_trace: true}",
        "trajectory_pool: {key_list: [group_id]}",
        "runtime_monitor: {health_check: {timeout: 5.0}}",
        "",
      ].join("\n"),
    );
    const run = await runNexrl(["validate", "-c", recipe], { cwd: dir });
    expect(run.code).toBe(EXIT_CODES.invalidRecipe);
    expect(run.stdout).toBe("");
    const lines = run.stderr.split("\n");
    expect(lines[0]).toBe("nexrl: invalid recipe");
    expect(lines[1]).toBe(`Invalid recipe ${recipe}:`);
    const problems = lines.filter((line) => line.startsWith("  - ")).map((line) => line.slice(4));
    expect(problems).toEqual([
      expect.stringMatching(
        /^logger\.backend\[1\]: swanlab is not supported: .*supported: console, jsonl, tensorboard, mlflow, wandb \(set in .*ported\.yaml:2\)$/,
      ),
      expect.stringMatching(/^rollout_worker\.save_trace: trace files are not available: .*remove it \(set in .*:3\)$/),
      expect.stringMatching(
        /^trajectory_pool\.key_list: the pool does not group trajectories.*remove it \(or set \[\]\) \(set in .*:4\)$/,
      ),
      expect.stringMatching(/^runtime_monitor\.health_check: .*Remove runtime_monitor\.health_check \(set in .*:5\)$/),
    ]);
    // the same recipe without them is valid
    const data = join(dirname(pigLatinRecipe), "data");
    await writeFile(
      recipe,
      [
        `defaults: [${pigLatinRecipe}, _self_]`,
        "logger: {backend: [console, jsonl]}",
        `data: {data_files: [${data}/train.jsonl]}`,
        `validate: {data: {data_files: [${data}/val.jsonl]}}`,
        "",
      ].join("\n"),
    );
    const fixed = await runNexrl(["validate", "-c", recipe], { cwd: dir });
    expect([fixed.code, fixed.stderr]).toEqual([EXIT_CODES.ok, ""]);
    expect(fixed.stdout).toContain(`recipe ok: ${recipe}`);
  }, 60_000);

  it("refuses GRPO with groups of one, in validate and in the run, naming data.rollout_repeat_n", async () => {
    const dir = await tempDir();
    for (const args of [
      ["validate", "-c", mathRecipe, "data.rollout_repeat_n=1"],
      ["-m", "training-service", "-c", mathRecipe, "--run-nexrl", "-o", join(dir, "run"), "data.rollout_repeat_n=1"],
    ]) {
      const run = await runNexrl(args, { cwd: dir });
      expect([run.code, run.stdout]).toEqual([EXIT_CODES.invalidRecipe, ""]);
      expect(problems(run.stderr)).toEqual([
        expect.stringMatching(
          /^data\.rollout_repeat_n: is 1, and `remote_api_grpo` compares each rollout with the other rollouts of its task: in a group of one, every advantage is 0 and nothing is learned; set it to 2 or more/,
        ),
      ]);
    }
  }, 60_000);

  it("refuses a custom trainer extending GrpoTrainer with groups of one, in validate and in the run", async () => {
    const dir = await tempDir();
    await mkdir(join(dir, "node_modules"));
    await symlink(root, join(dir, "node_modules", "nexrl"), "dir");
    await writeFile(
      join(dir, "trainer.ts"),
      'import { GrpoTrainer } from "nexrl";\nexport class MyGrpo extends GrpoTrainer {}\n',
    );
    await writeFile(
      join(dir, "recipe.yaml"),
      [
        `defaults: [${mathRecipe}, _self_]`,
        "trainer: {type: custom, custom_trainer_module_path: trainer.ts, custom_trainer_class_name: MyGrpo}",
        `data: {data_files: [${join(root, "recipe/math/data/easy_train.jsonl")}]}`,
        `validate: {data: {data_files: [${join(root, "recipe/math/data/easy_test.jsonl")}]}}`,
        "init: null",
        "",
      ].join("\n"),
    );
    for (const args of [
      ["validate", "-c", "recipe.yaml", "data.rollout_repeat_n=1"],
      ["train", "-c", "recipe.yaml", "-o", join(dir, "run"), "data.rollout_repeat_n=1"],
    ]) {
      const run = await runNexrl(args, { cwd: dir });
      expect([run.code, run.stdout.includes("step 1/")]).toEqual([EXIT_CODES.invalidRecipe, false]);
      expect(run.stderr).toContain(
        "data.rollout_repeat_n: is 1, and the trainer MyGrpo (a GrpoTrainer) compares each rollout with the other rollouts of its task",
      );
    }
    const groups = await runNexrl(["validate", "-c", "recipe.yaml", "data.rollout_repeat_n=2"], { cwd: dir });
    expect([groups.code, groups.stderr]).toEqual([EXIT_CODES.ok, ""]);
  }, 60_000);

  it("refuses cross_entropy under remote_api_grpo unless trainer.allow_loss_without_advantages opts in", async () => {
    const dir = await tempDir();
    const refused = await runNexrl(
      ["validate", "-c", mathRecipe, "service.train_service.config.loss_fn=cross_entropy"],
      {
        cwd: dir,
      },
    );
    expect(refused.code).toBe(EXIT_CODES.invalidRecipe);
    expect(problems(refused.stderr)).toEqual([
      expect.stringMatching(
        /^service\.train_service\.config\.loss_fn: `cross_entropy` reads no advantages, .*set `trainer\.allow_loss_without_advantages: true` if that is what you want/,
      ),
    ]);
    const optedIn = await runNexrl(
      [
        "validate",
        "-c",
        mathRecipe,
        "service.train_service.config.loss_fn=cross_entropy",
        "++trainer.allow_loss_without_advantages=true",
      ],
      { cwd: dir },
    );
    expect([optedIn.code, optedIn.stderr]).toEqual([EXIT_CODES.ok, ""]);
  }, 60_000);

  it("accepts NexRL's trajectory_pool.group_size when it equals data.rollout_repeat_n, and refuses another", async () => {
    const dir = await tempDir();
    // recipe/agent_tools/local.yaml: rollout_repeat_n 8, group_size 1 (NexRL's "no grouping in the pool").
    const ported = await runNexrl(["validate", "-c", agentToolsRecipe, "trajectory_pool.group_size=8"], { cwd: dir });
    expect([ported.code, ported.stderr]).toEqual([EXIT_CODES.ok, ""]);
    const inconsistent = await runNexrl(["validate", "-c", agentToolsRecipe, "trajectory_pool.group_size=4"], {
      cwd: dir,
    });
    expect(inconsistent.code).toBe(EXIT_CODES.invalidRecipe);
    expect(problems(inconsistent.stderr)).toEqual([
      expect.stringMatching(
        /^trajectory_pool\.group_size: is 4, and data\.rollout_repeat_n is 8: .*set it to 8 \(or 1, or remove it\)/,
      ),
    ]);
  }, 60_000);
});
