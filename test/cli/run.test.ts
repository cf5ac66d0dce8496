import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCli } from "../../src/cli/run.js";

const root = path.resolve(import.meta.dirname, "../..");
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function cli(argv: string[], env: Record<string, string | undefined> = {}) {
  let stdout = "";
  let stderr = "";
  const code = await runCli(argv, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env,
    cwd: root,
    version: "9.9.9",
  });
  return { code, stdout, stderr };
}

describe("nexrl CLI", () => {
  it("--help lists the options and the exit codes", async () => {
    const { code, stdout } = await cli(["--help"]);
    expect(code).toBe(0);
    for (const flag of ["-m, --mode", "-c, --train-config", "-r, --run-nexrl", "-t, --tag", "-o, --output-dir", "validate"]) expect(stdout).toContain(flag);
    expect(stdout).toMatch(/Exit codes:\n\s+0\s+success\n\s+1\s+the recipe is invalid/);
    expect((await cli([])).stdout).toContain("Usage:");
    expect(await cli(["--version"])).toMatchObject({ code: 0, stdout: "9.9.9\n" });
  });

  it("validate exits 1 on a misspelt key and prints the file, the key path and a suggestion", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-cli-"));
    dirs.push(dir);
    const file = path.join(dir, "bad.yaml");
    await writeFile(file, `defaults: [${path.join(root, "recipe/pig_latin/local.yaml")}, _self_]\ntrainer:\n  total_train_step: 10\n`);
    const { code, stderr, stdout } = await cli(["validate", "-c", file]);
    expect(code).toBe(EXIT_CODES.invalidRecipe);
    expect(stdout).toBe("");
    expect(stderr).toContain(file);
    expect(stderr).toContain("trainer.total_train_step: unknown key; did you mean `total_train_steps`?");
  });

  it("validate accepts the shipped local recipes", async () => {
    for (const recipe of ["recipe/pig_latin/local.yaml", "recipe/math/local.yaml"]) {
      const { code, stdout } = await cli(["validate", "-c", recipe]);
      expect(code).toBe(0);
      expect(stdout).toContain(`recipe ok: ${path.join(root, recipe)}`);
      expect(stdout).toContain("common.yaml");
    }
  });

  it("without --run-nexrl prints the resolved recipe with secrets redacted, and the plan", async () => {
    const { code, stdout, stderr } = await cli(
      ["-m", "training-service", "-c", "recipe/pig_latin/tinker.yaml", "--tag", "v1", "trainer.total_train_steps=7"],
      { TINKER_API_KEY: "tml-very-secret-key-123" },
    );
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).not.toContain("tml-very-secret-key-123");
    expect(stdout).toContain('api_key: "***"');
    expect(stdout).toContain("total_train_steps: 7");
    expect(stdout).toMatch(/trainer:\s+remote_api_cross_entropy, 7 steps/);
    expect(stdout).toContain(`output dir:     ${path.join(root, "outputs", "pig_latin", "v1")}`);
    expect(stdout).toContain("Add --run-nexrl to train.");
  });

  it("--output-dir wins over the tag", async () => {
    const { stdout } = await cli(["-c", "recipe/pig_latin/local.yaml", "-t", "v2", "-o", "/tmp/run-x"]);
    expect(stdout).toContain("output dir:     /tmp/run-x");
  });

  it("--run-nexrl says clearly that training is not available yet", async () => {
    const { code, stderr } = await cli(["-c", "recipe/pig_latin/local.yaml", "--run-nexrl"]);
    expect(code).toBe(EXIT_CODES.runFailed);
    expect(stderr).toContain("training is not available yet");
  });

  it("refuses self-hosted mode and says what to use", async () => {
    const { code, stderr } = await cli(["-m", "self-hosted", "-c", "recipe/pig_latin/local.yaml"]);
    expect(code).toBe(EXIT_CODES.usage);
    expect(stderr).toContain("self-hosted mode is not supported");
    expect(stderr).toContain("Use -m training-service");
  });

  it("rejects malformed command lines with exit 2", async () => {
    expect((await cli(["--bogus"])).code).toBe(EXIT_CODES.usage);
    const stray = await cli(["-c", "recipe/pig_latin/local.yaml", "extra"]);
    expect(stray.code).toBe(EXIT_CODES.usage);
    expect(stray.stderr).toContain('unexpected argument "extra"');
    expect((await cli(["validate"])).stderr).toContain("no recipe given");
    expect((await cli(["-m", "cluster", "-c", "x.yaml"])).stderr).toContain('unknown mode "cluster"');
  });

  it("the installed bin runs", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(root, "dist/cli/main.js"), "--help"]);
    expect(stdout).toContain("--run-nexrl");
  });
});
