/**
 * Issue 27, item 11: damaged run files. A run-state file whose contents changed after the checkpoint
 * wrote it is refused as damaged (its checksum), naming the checkpoint to resume from instead; a
 * metrics row cut short and a samples line that is not a JSON object are dropped on resume with a
 * warning naming the file and line, instead of silently or with "a bug in nexrl".
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { readJsonl, runCliChild, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

/** A finished two-step run with a checkpoint after each step: its project folder. */
async function twoStepRun(): Promise<string> {
  const dir = await userProject();
  await writeWorker(dir);
  await writeRecipe(dir);
  const first = await runCliChild(runArgs(dir, 2), { cwd: dir });
  expect(first.code, first.stderr).toBe(EXIT_CODES.ok);
  return dir;
}

const runArgs = (dir: string, steps: number, ...extra: string[]): string[] => [
  "-c",
  "recipe.yaml",
  "-r",
  "-o",
  join(dir, "out"),
  "trainer.save_freq=1",
  `trainer.total_train_steps=${steps}`,
  ...extra,
];

describe("damaged run files on resume", () => {
  it("refuses a run state whose contents changed as damaged, naming the earlier checkpoint", async () => {
    const project = await twoStepRun();
    const state = join(project, "out", "checkpoints", "step_000002.json");
    const text = await readFile(state, "utf8");
    // One changed character in a key a resume compares: read unchecked, it would look like a changed setting.
    const damaged = text.replace(/"seed": (\d)/, (_, digit: string) => `"seed": ${(Number(digit) + 1) % 10}`);
    expect(damaged).not.toBe(text);
    await writeFile(state, damaged);
    const resumed = await runCliChild(runArgs(project, 3, "resume.mode=auto"), { cwd: project });
    expect(resumed.code).toBe(EXIT_CODES.runFailed);
    expect(resumed.stderr).toContain(`the run state ${state} is damaged: its checksum does not match its contents`);
    expect(resumed.stderr).toContain(
      `resume from the checkpoint before it: delete ${state} (a resume then takes ${join(project, "out", "checkpoints", "step_000001.json")})`,
    );
    expect(resumed.stderr).not.toContain("changes settings");
  });

  it("warns of a metrics row cut short and of a samples line that is null, and resumes", async () => {
    const dir = await twoStepRun();
    const out = join(dir, "out");
    const metricsFile = join(out, "metrics.jsonl");
    const metrics = (await readFile(metricsFile, "utf8")).trimEnd().split("\n");
    expect(metrics).toHaveLength(2);
    // The last row cut in the middle, as a process stopped or a full disk leaves it.
    await writeFile(metricsFile, `${metrics[0]}\n${metrics[1]!.slice(0, 30)}`);
    const samplesFile = join(out, "samples.jsonl");
    await writeFile(samplesFile, `${await readFile(samplesFile, "utf8")}null\n`);
    const sampleLines = (await readFile(samplesFile, "utf8")).trimEnd().split("\n").length;

    const resumed = await runCliChild(runArgs(dir, 3, "resume.mode=auto"), { cwd: dir });
    expect(resumed.code, resumed.stderr).toBe(EXIT_CODES.ok);
    expect(resumed.stdout).toContain(
      `warning: ${metricsFile} line 2 is cut short (the process stopped or the disk filled while writing it): the resume drops it; step 2's row stays missing, as the resumed run starts after it (the checkpoint is of step 2)`,
    );
    expect(resumed.stdout).toContain(
      `warning: ${samplesFile} line ${sampleLines} is not a JSON object (null): the resume drops it`,
    );
    expect(resumed.stderr).not.toContain("a bug in nexrl");
    expect((await readJsonl<{ step: number }>(metricsFile)).map((row) => row.step)).toEqual([1, 3]);
  });
});
