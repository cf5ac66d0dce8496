/** Issue 13, items 14 and 15: SIGTERM stops a run like the first Ctrl-C; a resume that changes the data order or the algorithm is refused. */
import { cp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { RESUME_SAFE_SETTINGS, runSettings } from "../../src/outputs/resume-settings.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { readJsonl, runCliChild, startCli, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

describe("SIGTERM", () => {
  it("finishes the step in flight, saves a checkpoint and exits 143; the run resumes from it", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const run = startCli(["-c", "recipe.yaml", "-r", "-o", out, "trainer.total_train_steps=500"], { cwd: dir });
    await run.waitFor("step 1/500");
    run.child.kill("SIGTERM");
    const ended = await run.done;
    expect(ended.code).toBe(EXIT_CODES.terminated);
    expect(ended.stderr).toContain(
      "nexrl: SIGTERM: stopping after the current step and saving a checkpoint (a second signal to quit now)",
    );
    const [, stopped] = /stopped \(resume with resume\.mode=auto\) after step (\d+)/.exec(ended.stdout) ?? [];
    expect(Number(stopped)).toBeGreaterThanOrEqual(1);
    expect(await readdir(join(out, "checkpoints"))).toContain(`step_${stopped!.padStart(6, "0")}.json`);
    const resumed = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, `trainer.total_train_steps=${Number(stopped) + 1}`, "resume.mode=auto"],
      { cwd: dir },
    );
    expect(resumed.code).toBe(EXIT_CODES.ok);
    expect((await readJsonl<{ step: number }>(join(out, "metrics.jsonl"))).map((r) => r.step).at(-1)).toBe(
      Number(stopped) + 1,
    );
  });
});

describe("resuming with changed settings", () => {
  it("refuses a changed data.seed or learning rate, naming each with both values; resume.allow_changed accepts them with a warning; safe settings change freely", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const cli = (...overrides: string[]) =>
      runCliChild(["-c", "recipe.yaml", "-r", "-o", out, "trainer.save_freq=1", ...overrides], { cwd: dir });
    expect((await cli("trainer.total_train_steps=1")).code).toBe(EXIT_CODES.ok);

    const refused = await cli(
      "resume.mode=auto",
      "trainer.total_train_steps=2",
      "data.seed=8",
      "service.train_service.config.learning_rate=0.02",
    );
    expect(refused.code).toBe(EXIT_CODES.runFailed);
    expect(refused.stderr).toBe(
      `nexrl: cannot resume from ${join(out, "checkpoints", "step_000001.json")}: the recipe changes settings that decide the data order or the algorithm: data.seed (7 → 8), trainer.algorithm.learning_rate (0.01 → 0.02) (hyper-parameters set in service.train_service.config are compared as trainer.algorithm). ` +
        "Resuming would not continue the same run. Restore them, start a new run (another --output-dir, or resume.mode=disable), or accept the change with resume.allow_changed=[data.seed,trainer.algorithm.learning_rate]\n",
    );
    expect((await readJsonl(join(out, "metrics.jsonl"))).length).toBe(1);

    const safe = await cli(
      "resume.mode=auto",
      "trainer.total_train_steps=2",
      "rollout_worker.num_workers=1",
      "runtime_monitor.exception_handling.policy=continue",
    );
    expect(safe.stderr).toBe("");
    expect(safe.code).toBe(EXIT_CODES.ok);

    const allowed = await cli(
      "resume.mode=auto",
      "trainer.total_train_steps=3",
      "data.seed=8",
      "service.train_service.config.learning_rate=0.02",
      "resume.allow_changed=[data, service.train_service.config.learning_rate, tainer.typo]",
    );
    expect(allowed.code).toBe(EXIT_CODES.ok);
    expect(allowed.stdout).toContain(
      "warning: resuming with changed settings, as resume.allow_changed allows: data.seed (7 → 8), trainer.algorithm.learning_rate (0.01 → 0.02)",
    );
    expect(allowed.stdout).toContain(
      "warning: resume.allow_changed names tainer.typo, which is not a setting a resume compares (a typo?)",
    );
  });

  it("a changed data file is a changed setting; a data file moved with its project is not", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const recipe = await loadRecipe(join(dir, "recipe.yaml"), { env: {}, cwd: dir });
    const before = await runSettings(recipe.config);
    expect(before["data.data_files"]).toMatch(/^\["train\.jsonl \(\d+ bytes\)"\]$/);
    expect(Object.keys(before)).toEqual(expect.arrayContaining(["data.seed", "trainer.type", "weight.sync_mode"]));
    for (const key of Object.keys(before))
      expect(RESUME_SAFE_SETTINGS.some((safe) => key === safe || key.startsWith(`${safe}.`))).toBe(false);
    expect((await runCliChild(["-c", "recipe.yaml", "-r", "-o", out, "trainer.save_freq=1"], { cwd: dir })).code).toBe(
      0,
    );
    // The project (recipe, data, run folder) moved elsewhere resumes: data files compare by name and size.
    const moved = `${dir}-moved`;
    await cp(dir, moved, { recursive: true });
    try {
      const resumedThere = await runCliChild(
        ["-c", "recipe.yaml", "-r", "-o", join(moved, "out"), "resume.mode=auto", "trainer.total_train_steps=4"],
        { cwd: moved },
      );
      expect(resumedThere.stderr).toBe("");
      expect(resumedThere.code).toBe(EXIT_CODES.ok);
    } finally {
      await rm(moved, { recursive: true, force: true });
    }
    await writeFile(
      join(dir, "train.jsonl"),
      `${await readFile(join(dir, "train.jsonl"), "utf8")}{"prompt": "more"}\n`,
    );
    const refused = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "resume.mode=auto", "trainer.total_train_steps=4"],
      { cwd: dir },
    );
    expect(refused.code).toBe(EXIT_CODES.runFailed);
    expect(refused.stderr).toMatch(
      /data\.data_files \(\["train\.jsonl \(\d+ bytes\)"\] → \["train\.jsonl \(\d+ bytes\)"\]\)/,
    );
  });
});
