/**
 * Regression probes of issue 13 that were handled well already, kept so that they stay so: bad
 * recipes, damaged checkpoints, and the CLI's exit codes for each.
 */
import { cp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCliChild, tempDir, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

describe("bad recipes exit 1 with the file, the key and what to do", () => {
  const cases: Array<[string, (yaml: string) => string, RegExp]> = [
    [
      "a misspelt key",
      (y) => y.replace("total_train_steps", "total_train_step"),
      /trainer\.total_train_step: unknown key; did you mean `total_train_steps`\?/,
    ],
    ["a wrong type", (y) => y.replace("batch_size: 2", "batch_size: two"), /data\.batch_size: .*number/],
    [
      "a missing data file",
      (y) => y.replace("[train.jsonl]", "[missing.jsonl]"),
      /data\.data_files\[0\]: `missing\.jsonl` not found; tried /,
    ],
    [
      "a worker class the module does not export",
      (y) => y.replace("class_name: W", "class_name: Nope"),
      /rollout_worker\.custom_rollout_worker_module_path: .*Nope/,
    ],
    ["a YAML syntax error", (y) => `${y}\n  bad: [unclosed\n`, /YAML syntax error at line \d+/],
  ];
  for (const [what, edit, message] of cases) {
    it(what, async () => {
      const dir = await userProject();
      await writeWorker(dir);
      const path = await writeRecipe(dir);
      await writeFile(path, edit(await readFile(path, "utf8")));
      const run = await runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "out")], { cwd: dir });
      expect(run.code).toBe(EXIT_CODES.invalidRecipe);
      expect(run.stderr).toContain(`Invalid recipe ${path}`);
      expect(run.stderr).toMatch(message);
      expect(run.stderr).not.toMatch(/\n\s+at /);
    });
  }
});

describe("damaged checkpoints", () => {
  let project: string;
  beforeAll(async () => {
    project = await userProject(8, "file");
    await writeWorker(project);
    await writeRecipe(project);
    const run = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", join(project, "good"), "trainer.save_freq=1", "trainer.total_train_steps=2"],
      { cwd: project },
    );
    expect(run.code).toBe(0);
  }, 60_000);

  /** A copy of the good run folder, damaged by `damage`, then resumed: exit 3 and one line. */
  async function resumeDamaged(damage: (out: string) => Promise<void>) {
    const out = join(await tempDir(), "run");
    await cp(join(project, "good"), out, { recursive: true });
    await damage(out);
    const run = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "resume.mode=auto", "trainer.total_train_steps=3"],
      { cwd: project },
    );
    expect(run.code).toBe(EXIT_CODES.runFailed);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    return run.stderr;
  }

  it("a truncated run state", async () => {
    const stderr = await resumeDamaged(async (out) => {
      const path = join(out, "checkpoints", "step_000002.json");
      await writeFile(path, (await readFile(path, "utf8")).slice(0, 100));
    });
    expect(stderr).toMatch(
      /^nexrl: cannot read the run state .*step_000002\.json: .*JSON.*; if the file was damaged, delete it to resume from an earlier checkpoint\n$/,
    );
  });

  it("a run state of another format", async () => {
    const stderr = await resumeDamaged((out) =>
      writeFile(join(out, "checkpoints", "step_000002.json"), JSON.stringify({ format: "something else", step: 2 })),
    );
    expect(stderr).toMatch(/step_000002\.json is not a nexrl run state/);
  });

  it("a missing weights file", async () => {
    const stderr = await resumeDamaged((out) => rm(join(out, "checkpoints", "step_000002.nxs")));
    expect(stderr).toMatch(/^nexrl: cannot load .*step_000002\.nxs: no such file/);
  });

  it("a weights file with a flipped byte", async () => {
    const stderr = await resumeDamaged(async (out) => {
      const path = join(out, "checkpoints", "step_000002.nxs");
      const bytes = await readFile(path);
      bytes[bytes.length >> 1]! ^= 0xff;
      await writeFile(path, bytes);
    });
    expect(stderr).toMatch(/its checksum does not match its contents; the file is damaged, use another checkpoint/);
  });
});
