/** Issue 13, item 4: a rollout (or other user code) whose promise never settles. */
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import {
  readJsonl,
  runCliChild,
  userProject,
  writeRecipe,
  writeWorker,
  runWithTrainer,
} from "../support/user-project.js";

/** Row 3 (index 2, in the second batch) never settles while HANG=1. */
const HANGS_ON_ROW_3 = `if (process.env.HANG === "1" && task.index === 2) return new Promise(() => {});
    return this.ok(task);`;

describe("a rollout that never settles", () => {
  it("under stop_on_error: names the rollout, saves a checkpoint of the last step, exits 6; the resume matches a run that never hung", async () => {
    const dir = await userProject();
    await writeWorker(dir, HANGS_ON_ROW_3);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const hung = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir, env: { HANG: "1" } });
    expect(hung.code).toBe(EXIT_CODES.hung);
    expect(hung.stderr).toContain(
      "nexrl: rollout of row 3 (group 0-2, run 0) failed after 1 attempt(s): the rollout of row 3 (group 0-2, run 0) can never finish",
    );
    expect(hung.stdout).toContain("step 1/3");
    expect(hung.stdout).toContain(
      "warning: the process had nothing left to wait for while rolling out step 2: this rollout hangs and is ended as failed: row 3 (group 0-2, run 0)\n",
    );
    expect(hung.stdout).toMatch(/warning: the run stopped at step 1: saved a checkpoint of it \(.*step_000001\.json\)/);
    expect(await readdir(join(out, "checkpoints"))).toContain("step_000001.json");
    expect(await readJsonl(join(out, "failures.jsonl"))).toEqual([
      expect.objectContaining({ step: 2, row: 3, group: "0-2", run: 0, kind: "hung", action: "stop" }),
    ]);

    const resumed = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out, "resume.mode=auto"], { cwd: dir });
    expect(resumed.code).toBe(EXIT_CODES.ok);
    expect(resumed.stdout).toContain("resuming from");
    const clean = await runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "clean")], { cwd: dir });
    expect(clean.code).toBe(EXIT_CODES.ok);
    const loss = async (folder: string) =>
      (await readJsonl<{ step: number; "train/loss": number }>(join(folder, "metrics.jsonl"))).map((row) => [
        row.step,
        row["train/loss"],
      ]);
    expect(await loss(out)).toEqual(await loss(join(dir, "clean")));
  });

  it("under policy continue: the hung rollout is skipped, recorded and counted, and the run goes on", async () => {
    const dir = await userProject();
    await writeWorker(dir, HANGS_ON_ROW_3);
    await writeRecipe(dir, "runtime_monitor: {exception_handling: {policy: continue}}\n");
    const out = join(dir, "out");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir, env: { HANG: "1" } });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(EXIT_CODES.ok);
    expect(run.stdout).toContain(
      "warning: rollout of row 3 (group 0-2, run 0), attempt 1 failed (skipped): the rollout of row 3 (group 0-2, run 0) can never finish",
    );
    expect(run.stdout).toContain("done after step 3");
    const metrics = await readJsonl<Record<string, number>>(join(out, "metrics.jsonl"));
    expect(metrics.map((row) => row["rollout/timed_out"])).toEqual([0, 1, 0]);
    expect(await readJsonl(join(out, "failures.jsonl"))).toEqual([
      expect.objectContaining({ step: 2, row: 3, kind: "hung", action: "skip" }),
    ]);
  });

  it("a trainer that never settles stops the run with exit 6, saying what the run was doing", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeFile(
      join(dir, "trainer.ts"),
      `import { BaseTrainer, type Trajectory } from "nexrl";
export class Stuck extends BaseTrainer {
  protected prepareTrajectories(trajectories: Trajectory[]) {
    return new Promise<Trajectory[]>(() => {});
  }
}
`,
    );
    await writeRecipe(dir);
    const run = await runWithTrainer(dir, "Stuck");
    expect(run.code).toBe(EXIT_CODES.hung);
    expect(run.stderr).toBe(
      "nexrl: the run stopped making progress while training step 1: the process had nothing left to wait for (no timer, socket or file operation) while a promise was still pending; look for a promise in user code (a trainer, an evaluator, a worker's constructor) that is never resolved\n",
    );
  });
});
