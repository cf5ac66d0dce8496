import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";
import project from "../../vitest.config.js";

const root = path.resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

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
  });

  it("coverage fails when a file falls below the project's thresholds", async () => {
    const reports = await mkdtemp(path.join(tmpdir(), "nexrl-coverage-probe-"));
    try {
      const vitest = path.join(root, "node_modules/vitest/vitest.mjs");
      const config = path.join(root, "test/tooling/fixtures/coverage-drop/vitest.config.ts");
      const outcome = await run(process.execPath, [vitest, "run", "--coverage", "--config", config], {
        cwd: root,
        env: { ...process.env, COVERAGE_PROBE_DIR: reports, FORCE_COLOR: "0" },
      }).then(
        () => ({ code: 0, output: "" }),
        (error: { code: number; stdout: string; stderr: string }) => ({
          code: error.code,
          output: error.stdout + error.stderr,
        }),
      );
      expect(outcome.code).toBe(1);
      // The threshold the project's config sets today (it moves with the measured coverage).
      const thresholds = project.test!.coverage as { thresholds: { lines: number } };
      expect(outcome.output).toContain(`does not meet global threshold (${thresholds.thresholds.lines}%)`);
      expect(outcome.output).toMatch(/Coverage for lines \([\d.]+%\) does not meet/);
    } finally {
      await rm(reports, { recursive: true, force: true });
    }
  });
});
