/**
 * Errors in user code keep their place (issue 15, item 4): a worker file that throws is named
 * with its line, the row and the rollout; `--verbose` and `NEXRL_DEBUG=1` print the whole stack and
 * the cause chain; no retry is suggested for a bug a retry would meet again.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { pigLatinOverrides, root, runNexrl, tempDir } from "../support/runs.js";

const WORKER = join(root, "test/support/fixtures/buggy-worker.ts");
/** Where the fixture reads the field its rows lack. */
const THROW_SITE = `${WORKER}:14:32 (BuggyWorker.rollout)`;

/** A pig latin recipe whose worker is the buggy fixture, in a fresh folder; returns the folder. */
async function buggyProject(extra = ""): Promise<string> {
  const dir = await tempDir("nexrl-user-errors-");
  const pigLatin = join(root, "recipe/pig_latin");
  await writeFile(
    join(dir, "recipe.yaml"),
    [
      `defaults: [${pigLatin}/local.yaml, _self_]`,
      `data: {data_files: [${pigLatin}/data/train.jsonl], shuffle: false}`,
      `validate: {data: {data_files: [${pigLatin}/data/val.jsonl]}}`,
      `rollout_worker: {type: custom, custom_rollout_worker_module_path: ${WORKER}, custom_rollout_worker_class_name: BuggyWorker, num_workers: 1}`,
      extra,
      "",
    ].join("\n"),
  );
  return dir;
}

const overrides = pigLatinOverrides({ steps: 1, saveFreq: 0, validateFreq: 0 });

describe("an error thrown by a user's worker", () => {
  it("names the file and line, the row and the rollout, with no retry hint; --verbose and NEXRL_DEBUG=1 add the stack and causes", async () => {
    const dir = await buggyProject();
    const args = ["-c", "recipe.yaml", "-r", ...overrides];
    const [plain, verbose, debug] = await Promise.all([
      runNexrl([...args, "-o", join(dir, "a")], { cwd: dir }),
      runNexrl([...args, "-o", join(dir, "b"), "--verbose"], { cwd: dir }),
      runNexrl([...args, "-o", join(dir, "c")], { cwd: dir, env: { ...process.env, NEXRL_DEBUG: "1" } }),
    ]);
    const message = [
      "nexrl: rollout of row 1 (group 0-0, run 0) failed after 1 attempt(s): TypeError: Cannot read properties of undefined (reading 'text')",
      `    at ${THROW_SITE}`,
      "A retry would fail the same way: fix the code above, then run again (nexrl --verbose or NEXRL_DEBUG=1 prints the whole stack)",
      "",
    ].join("\n");
    expect([plain.code, plain.stderr]).toEqual([EXIT_CODES.runFailed, message]);
    expect(plain.stderr).not.toContain("retry failed rollouts");
    for (const run of [verbose, debug]) {
      expect(run.code).toBe(EXIT_CODES.runFailed);
      expect(run.stderr.startsWith(`${message}\nRolloutError: rollout of row 1`)).toBe(true);
      const cause = run.stderr.slice(run.stderr.indexOf("\nCaused by: "));
      expect(cause.split("\n").slice(1, 3)).toEqual([
        "Caused by: TypeError: Cannot read properties of undefined (reading 'text')",
        `    at BuggyWorker.rollout (${WORKER}:14:32)`,
      ]);
      // The whole stack: nexrl's frames below the worker's.
      expect(cause).toMatch(/\n {4}at (\S+ \()?file:\/\/.*\/dist\/rollouts\/runner\.js:\d+:\d+\)?\n/);
    }
  }, 90_000);

  it("under policy continue, shows where on the console and records it in failures.jsonl", async () => {
    const dir = await buggyProject("runtime_monitor: {exception_handling: {policy: continue}}");
    const out = join(dir, "out");
    const run = await runNexrl(["-c", "recipe.yaml", "-r", "-o", out, ...overrides], { cwd: dir });
    // Every rollout fails, so the step has nothing to train on.
    expect(run.code).toBe(EXIT_CODES.noRolloutSucceeded);
    expect(run.stdout).toContain(
      `warning: rollout of row 1 (group 0-0, run 0), attempt 1 failed (skipped): TypeError: Cannot read properties of undefined (reading 'text') at ${THROW_SITE} [the first failure like this; every failure is in failures.jsonl]\n`,
    );
    const rows = (await readFile(join(out, "failures.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    // One row per rollout of the first step: pig_latin/local.yaml's batch of 32 phrases.
    expect(rows.length).toBe(32);
    for (const [i, row] of rows.entries())
      expect(row).toMatchObject({ row: i + 1, kind: "error", error: "TypeError", at: THROW_SITE, action: "skip" });
  }, 90_000);
});
