import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify, stripVTControlCharacters } from "node:util";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";
import project from "../../vitest.config.js";

const root = path.resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** Runs a Node script of a tool to its end: its exit code, and its output when it failed. */
function runScript(
  script: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number; output: string }> {
  return run(process.execPath, [script, ...args], { cwd, env: { ...process.env, ...env, FORCE_COLOR: "0" } }).then(
    () => ({ code: 0, output: "" }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      output: error.stdout + error.stderr,
    }),
  );
}

describe("the project's guards fail on deliberately broken code", () => {
  it("lint reports a floating promise, a misused promise and a non-exhaustive switch", async () => {
    // The fixture is in the lint ignores (it must not break `npm run lint`); lint it on purpose here.
    const eslint = new ESLint({ cwd: root, ignore: false });
    const [result] = await eslint.lintFiles(["test/tooling/fixtures/lint/promises.ts"]);
    const rules = result!.messages.map((m) => m.ruleId).sort();
    expect(rules).toEqual([
      "@typescript-eslint/no-floating-promises",
      "@typescript-eslint/no-misused-promises",
      "@typescript-eslint/switch-exhaustiveness-check",
    ]);
    // Typed linting builds the project's TypeScript program first: a minute on a busy 2-core machine.
  }, 120_000);

  it("coverage fails when a file falls below the project's thresholds", async () => {
    const reports = await mkdtemp(path.join(tmpdir(), "nexrl-coverage-probe-"));
    try {
      const vitest = path.join(root, "node_modules/vitest/vitest.mjs");
      const config = path.join(root, "test/tooling/fixtures/coverage-drop/vitest.config.ts");
      const outcome = await runScript(vitest, ["run", "--coverage", "--config", config], root, {
        COVERAGE_PROBE_DIR: reports,
      });
      expect(outcome.code).toBe(1);
      const lines = (project.test!.coverage as { thresholds: { lines: number } }).thresholds.lines;
      expect(outcome.output).toMatch(
        new RegExp(String.raw`Coverage for lines \([\d.]+%\) does not meet global threshold \(${lines}%\)`),
      );
    } finally {
      await rm(reports, { recursive: true, force: true });
    }
  });

  it("knip names an export nothing imports", async () => {
    const knip = path.join(root, "node_modules/knip/bin/knip.js");
    const fixture = path.join(root, "test/tooling/fixtures/unused-export");
    const outcome = await runScript(knip, ["--no-progress", "--no-config-hints", "--directory", fixture], fixture);
    expect(outcome.code).toBe(1);
    // Without colours (knip colours even under FORCE_COLOR=0).
    const text = stripVTControlCharacters(outcome.output);
    expect(text).toMatch(/Unused exports \(1\)\s+forgotten\s+function\s+src\/helpers\.ts:7:17/);
  }, 60_000);
});
