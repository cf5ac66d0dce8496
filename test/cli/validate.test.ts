import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { pigLatinRecipe, runNexrl, tempDir } from "../run-folder/helpers.js";

describe("nexrl validate (the built CLI)", () => {
  it("refuses an unsupported logger and keys nothing would read, naming each with what to do", async () => {
    const dir = await tempDir();
    const recipe = join(dir, "ported.yaml");
    await writeFile(
      recipe,
      [
        `defaults: [${pigLatinRecipe}, _self_]`,
        "logger: {backend: [console, wandb]}",
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
        /^logger\.backend\[1\]: wandb is not supported: .*supported: console, jsonl \(set in .*ported\.yaml:2\)$/,
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
});
