/** Issue 13, item 5: uncaught exceptions and unhandled rejections raised by user code during a run. */
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

const SECRET = "sk-SECRET-0123456789";

/** On row 3 (the second step) a timer throws, or a promise rejects unhandled, with the API key in the message. */
const THROWS_ON_ROW_3 = `if (task.index === 2) {
      if (process.env.HOW === "reject") void Promise.reject(new Error(\`lost \${process.env.TINKER_API_KEY}\`));
      else setTimeout(() => { throw new Error(\`boom TINKER_API_KEY=\${process.env.TINKER_API_KEY}\`); }, 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return this.ok(task);`;

describe("an uncaught error in user code during a run", () => {
  it("inside a rollout, under stop_on_error: fails that rollout with its row named and the secret redacted, saves a checkpoint, exits 3", async () => {
    const dir = await userProject();
    await writeWorker(dir, THROWS_ON_ROW_3);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], {
      cwd: dir,
      env: { TINKER_API_KEY: SECRET },
    });
    expect(run.code).toBe(EXIT_CODES.runFailed);
    // A bug in the worker: the error says where it is, and no retry is suggested.
    expect(run.stderr).toBe(
      `nexrl: rollout of row 3 (group 0-2, run 0) failed after 1 attempt(s): an uncaught Error: boom TINKER_API_KEY=*** in the rollout of row 3 (group 0-2, run 0)\n    at ${join(dir, "worker.ts")}:10:37 (Timeout._onTimeout)\nA retry would fail the same way: fix the code above, then run again (nexrl --verbose or NEXRL_DEBUG=1 prints the whole stack)\n`,
    );
    expect(run.stdout).toMatch(/saved a checkpoint of it \(.*step_000001\.json\)/);
    expect(await readdir(join(out, "checkpoints"))).toContain("step_000001.json");
    const [failure] = await readJsonl<Record<string, string>>(join(out, "failures.jsonl"));
    expect(failure).toMatchObject({ row: 3, kind: "uncaught", error: "Error", action: "stop" });
    expect(failure!.stack).toContain("boom TINKER_API_KEY=***");
    expect(failure!.stack).toContain("worker.ts");
    expect(JSON.stringify(failure)).not.toContain(SECRET);
  });

  it("an unhandled rejection inside a rollout, under policy continue: the rollout is skipped and recorded, the run goes on", async () => {
    const dir = await userProject();
    await writeWorker(dir, THROWS_ON_ROW_3);
    await writeRecipe(dir, "runtime_monitor: {exception_handling: {policy: continue}}\n");
    const out = join(dir, "out");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], {
      cwd: dir,
      env: { TINKER_API_KEY: SECRET, HOW: "reject" },
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(EXIT_CODES.ok);
    expect(run.stdout).toContain(
      "warning: rollout of row 3 (group 0-2, run 0), attempt 1 failed (skipped): an uncaught Error: lost *** in the rollout of row 3",
    );
    expect(run.stdout).toContain("done after step 3");
    expect(run.stdout).not.toContain(SECRET);
    expect(await readJsonl(join(out, "failures.jsonl"))).toEqual([
      expect.objectContaining({ step: 2, row: 3, kind: "uncaught", action: "skip" }),
    ]);
  });

  it("a thrown value that is not an Error is shown as its JSON, not [object Object]", async () => {
    const dir = await userProject();
    await writeWorker(
      dir,
      `setTimeout(() => { throw { code: 7, why: "quota" }; }, 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    return this.ok(task);`,
    );
    await writeRecipe(dir);
    const out = join(dir, "out");
    const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: dir });
    expect(run.code).toBe(EXIT_CODES.runFailed);
    expect(run.stderr).toContain(
      'failed after 1 attempt(s): an uncaught throw of {"code":7,"why":"quota"} in the rollout of row',
    );
    const [failure] = await readJsonl<Record<string, string>>(join(out, "failures.jsonl"));
    expect(failure!.message).toMatch(/^an uncaught throw of \{"code":7,"why":"quota"\} in the rollout of row \d/);
  });

  it("outside a run (a TS recipe module): exit 3 with the error, not Node's exit 1 (which would say 'invalid recipe')", async () => {
    const dir = await userProject();
    await writeFile(
      join(dir, "recipe.ts"),
      `setTimeout(() => { throw new Error(\`late recipe error \${process.env.TINKER_API_KEY}\`); }, 1);
await new Promise((resolve) => setTimeout(resolve, 100));
export default {};
`,
    );
    const run = await runCliChild(["validate", "-c", "recipe.ts"], { cwd: dir, env: { TINKER_API_KEY: SECRET } });
    expect(run.code).toBe(EXIT_CODES.runFailed);
    expect(run.stderr).toMatch(
      /^nexrl: an uncaught error in code nexrl ran\nError: late recipe error \*\*\*\n\s+at .*recipe\.ts/,
    );
  });

  it("outside any rollout (in the trainer): stops the run with exit 3, saying what the run was doing", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeFile(
      join(dir, "trainer.ts"),
      `import { CrossEntropyTrainer, type Trajectory } from "nexrl";
export class Leaky extends CrossEntropyTrainer {
  protected async prepareTrajectories(trajectories: Trajectory[], metrics: Record<string, number>) {
    setTimeout(() => { throw new TypeError("trainer bug"); }, 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    return super.prepareTrajectories(trajectories, metrics);
  }
}
`,
    );
    await writeRecipe(dir);
    const run = await runWithTrainer(dir, "Leaky");
    expect(run.code).toBe(EXIT_CODES.runFailed);
    expect(run.stderr).toBe(
      "nexrl: an uncaught TypeError: trainer bug was raised outside any rollout while training step 1\n",
    );
  });
});
