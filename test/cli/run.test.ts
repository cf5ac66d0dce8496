import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
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
    for (const flag of [
      "-m, --mode",
      "-c, --train-config",
      "-r, --run-nexrl",
      "-t, --tag",
      "-o, --output-dir",
      "validate",
    ])
      expect(stdout).toContain(flag);
    expect(stdout).toMatch(/Exit codes:\n\s+0\s+success\n\s+1\s+the recipe is invalid/);
    expect((await cli([])).stdout).toContain("Usage:");
    expect(await cli(["--version"])).toMatchObject({ code: 0, stdout: "9.9.9\n" });
  });

  it("validate exits 1 on a misspelt key and prints the file, the key path and a suggestion", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-cli-"));
    dirs.push(dir);
    const file = path.join(dir, "bad.yaml");
    await writeFile(
      file,
      `defaults: [${path.join(root, "recipe/pig_latin/local.yaml")}, _self_]\ntrainer:\n  total_train_step: 10\n`,
    );
    const { code, stderr, stdout } = await cli(["validate", "-c", file]);
    expect(code).toBe(EXIT_CODES.invalidRecipe);
    expect(stdout).toBe("");
    expect(stderr).toContain(file);
    expect(stderr).toContain("trainer.total_train_step: unknown key; did you mean `total_train_steps`?");
  });

  it("validate accepts the shipped local recipes", async () => {
    // math/local.yaml needs the checkpoint of its SFT stage first (test/recipes/validate.test.ts).
    for (const recipe of ["recipe/pig_latin/local.yaml", "recipe/agent_tools/local.yaml"]) {
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
    expect(stdout).toContain(`output dir:     ${path.join(root, "runs", "v1")}`);
    expect(stdout).toContain("Add --run-nexrl to train.");
  });

  it("--output-dir wins over the tag, and NEXRL_STORAGE_PATH replaces ./runs", async () => {
    const { stdout } = await cli(["-c", "recipe/pig_latin/local.yaml", "-t", "v2", "-o", "/tmp/run-x"]);
    expect(stdout).toContain("output dir:     /tmp/run-x");
    const stored = await cli(["-c", "recipe/pig_latin/local.yaml", "-t", "v3"], {
      NEXRL_STORAGE_PATH: "/tmp/nexrl-store",
    });
    expect(stored.stdout).toContain("output dir:     /tmp/nexrl-store/v3");
  });

  it("--run-nexrl trains the recipe and prints a line per step", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-cli-"));
    dirs.push(dir);
    const { code, stdout, stderr } = await cli([
      "-c",
      "recipe/pig_latin/local.yaml",
      "--run-nexrl",
      "-o",
      dir,
      "trainer.total_train_steps=2",
    ]);
    expect(stderr).toBe("");
    expect(code).toBe(EXIT_CODES.ok);
    // SFT rows all get the same reward: the line leads with the loss.
    expect(stdout).toMatch(/step 1\/2 \| loss \d+\.\d{3} \|/);
    expect(stdout).toContain("done after step 2");
    expect(stdout).toContain("(resolved recipe: config.resolved.yaml)");
    expect(stdout).not.toContain("# resolved recipe");
    expect(await readFile(path.join(dir, "config.resolved.yaml"), "utf8")).toContain("total_train_steps: 2");
    const rows = (await readFile(path.join(dir, "metrics.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(rows.map((row: { step: number }) => row.step)).toEqual([1, 2]);
  });

  it("stops after the step in flight on Ctrl-C, saves a checkpoint and exits 130", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-cli-"));
    dirs.push(dir);
    const args = [
      "--import",
      "tsx",
      path.join(root, "src/cli/main.ts"),
      "-c",
      "recipe/pig_latin/local.yaml",
      "--run-nexrl",
      "-o",
      dir,
      "trainer.total_train_steps=500",
    ];
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
    let interrupted = false;
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk;
      if (!interrupted && stdout.includes("step 1/500")) interrupted = child.kill("SIGINT");
    });
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(EXIT_CODES.interrupted);
    expect(stderr).toContain("stopping after the current step and saving a checkpoint");
    const [, stopped] = /stopped \(resume with resume.mode=auto\) after step (\d+)/.exec(stdout) ?? [];
    expect(Number(stopped)).toBeGreaterThanOrEqual(1);
    expect(Number(stopped)).toBeLessThan(500);
    expect(await readdir(path.join(dir, "checkpoints"))).toContain(`step_${String(stopped).padStart(6, "0")}.json`);
    // the summary follows, with the command that continues the run
    expect(stdout).toContain(`run summary: stopped after step ${stopped} of 500`);
    expect(stdout).toContain(
      `  nexrl -m training-service -c recipe/pig_latin/local.yaml --run-nexrl -o ${dir} resume.mode=auto   # continue the run\n  nexrl report ${dir} --open\n`,
    );
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
