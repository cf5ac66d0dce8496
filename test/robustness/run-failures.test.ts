/** Issue 13, item 8 (and the string reward of item 16): what `policy: continue` shows and when it stops. */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { readJsonl, runCliChild, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

/** Row 1 returns a string reward; from the second step on every rollout throws (while BREAK=1). */
const BREAKS_FROM_STEP_2 = `if (task.index === 0) return { ...this.ok(task), reward: "1" };
    if (process.env.BREAK === "1" && task.batchIndex >= 1) throw new Error(\`no luck on data row \${task.index + 1}\`);
    return this.ok(task);`;

describe("policy continue", () => {
  it("shows the first failure of each kind, writes every failure to failures.jsonl, and stops with exit 5 at a step with no successful rollout", async () => {
    const dir = await userProject();
    await writeWorker(dir, BREAKS_FROM_STEP_2);
    await writeRecipe(dir, "runtime_monitor: {exception_handling: {policy: continue}}\n");
    const out = join(dir, "out");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out, "data.rollout_repeat_n=2"], {
      cwd: dir,
      env: { BREAK: "1" },
    });
    expect(run.code).toBe(EXIT_CODES.noRolloutSucceeded);
    const warnings = run.stdout.split("\n").filter((line) => line.includes("failed (skipped)"));
    expect(warnings).toEqual([
      'warning: rollout of row 1 (group 0-0, run 0), attempt 1 failed (skipped): InputError: Trajectory (group 0-0, run 0): reward is the string "1"; it must be a finite number [the first failure like this; every failure is in failures.jsonl]',
      expect.stringMatching(
        /^warning: rollout of row [34] \(group 0-[23], run [01]\), attempt 1 failed \(skipped\): Error: no luck on data row [34] at \/.*\/worker\.ts:\d+:\d+ \(W\.rollout\) \[the first failure like this; every failure is in failures\.jsonl\]$/,
      ),
    ]);
    expect(run.stderr).toBe(
      `nexrl: step 2 has no successful rollout: all 4 of its rollouts failed (4 failed attempts) and the continue policy skipped them, so there is nothing to train on. The first failure of each kind is shown above; every failure is in ${join(out, "failures.jsonl")}. Fix the cause and resume with resume.mode=auto\n`,
    );
    const failures = await readJsonl<Record<string, unknown>>(join(out, "failures.jsonl"));
    const keys = failures.map((f) => `${f.step} ${f.row} ${f.run} ${f.kind} ${f.action}`).sort();
    expect(keys).toEqual([
      "1 1 0 invalid_trajectory skip",
      "1 1 1 invalid_trajectory skip",
      "2 3 0 error skip",
      "2 3 1 error skip",
      "2 4 0 error skip",
      "2 4 1 error skip",
    ]);
    for (const f of failures.filter((f) => f.kind === "error")) expect(f.stack).toContain("worker.ts");
    expect(await readdir(join(out, "checkpoints"))).toContain("step_000001.json");

    const resumed = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "data.rollout_repeat_n=2", "resume.mode=auto"],
      {
        cwd: dir,
      },
    );
    expect(resumed.code).toBe(EXIT_CODES.ok);
    // The resume drops the failures of the steps it runs again, which now succeed.
    expect((await readJsonl<{ step: number }>(join(out, "failures.jsonl"))).map((f) => f.step)).toEqual([1, 1]);
  });
});
