import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { commandHelp } from "../../src/cli/help.js";
import { runCli } from "../../src/cli/run.js";
import type { CliIO } from "../../src/cli/io.js";
import { runServe } from "../../src/cli/serve.js";
import { UsageError } from "../../src/errors.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function io(): Promise<CliIO & { out: string[]; err: string[] }> {
  const cwd = await mkdtemp(path.join(tmpdir(), "nexrl-cli-serve-"));
  dirs.push(cwd);
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: { write: (t: string) => out.push(t) },
    stderr: { write: (t: string) => err.push(t) },
    env: {},
    cwd,
    version: "0.0.0-test",
  };
}

describe("nexrl serve command line", () => {
  it("parses the serve options with loopback defaults", () => {
    expect(parseCommandLine(["serve"])).toEqual({
      kind: "serve",
      protocol: "all",
      host: "127.0.0.1",
      port: 8000,
      seed: 0,
    });
    expect(
      parseCommandLine([
        "serve",
        "-p",
        "tinker",
        "--port",
        "0",
        "--host",
        "0.0.0.0",
        "-o",
        "out",
        "--faults",
        "429:0.1",
        "--seed",
        "7",
      ]),
    ).toEqual({
      kind: "serve",
      protocol: "tinker",
      host: "0.0.0.0",
      port: 0,
      outputDir: "out",
      faults: "429:0.1",
      seed: 7,
    });
    expect(parseCommandLine(["serve", "--help"])).toEqual({ kind: "help", command: "serve" });
    expect(() => parseCommandLine(["serve", "--protocol", "grpc"])).toThrow(
      /unknown protocol "grpc"; use one of tinker, weaver, openai, all/,
    );
    expect(() => parseCommandLine(["serve", "--port", "70000"])).toThrow(UsageError);
    expect(() => parseCommandLine(["serve", "--seed", "x"])).toThrow(/--seed must be an integer/);
    expect(() => parseCommandLine(["serve", "-c", "recipe.yaml"])).toThrow(/nexrl serve --help/);
    expect(commandHelp("serve", "1.0.0")).toMatch(
      /nexrl serve \[--protocol tinker\|weaver\|openai\|all\][\s\S]*--faults SPEC/,
    );
  });

  it("prints the URL of a server on a free port, serves until stopped, and exits 0", async () => {
    const cli = await io();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const running = runServe(
      { kind: "serve", protocol: "all", host: "127.0.0.1", port: 0, seed: 0, outputDir: "files", faults: "500:0.5" },
      cli,
      stopped,
    );
    await expect.poll(() => cli.out.join("")).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
    const url = /http:\/\/127\.0\.0\.1:\d+/.exec(cli.out.join(""))![0];
    expect(cli.out.join("")).toContain(`files in ${path.join(cli.cwd, "files")}`);
    expect(cli.out.join("")).toContain("faults: 500:0.5 (seed 0)");
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: "ok" });
    stop();
    expect(await running).toBe(0);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it("--allow-host and --cors reach the server: allowed names and origins are served, others get 403", async () => {
    const command = parseCommandLine([
      "serve",
      "--port",
      "0",
      "--protocol",
      "openai",
      "--allow-host",
      "nexrl.internal",
      "--cors",
      "http://localhost:3000/",
    ]);
    expect(command).toMatchObject({ allowedHosts: ["nexrl.internal"], corsOrigins: ["http://localhost:3000"] });
    const cli = await io();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const running = runServe(command as Extract<typeof command, { kind: "serve" }>, cli, stopped);
    await expect.poll(() => cli.out.join("")).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
    const url = /http:\/\/127\.0\.0\.1:\d+/.exec(cli.out.join(""))![0];
    const allowed = await fetch(`${url}/v1/models`, { headers: { origin: "http://localhost:3000" } });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("http://localhost:3000");
    expect((await fetch(`${url}/v1/models`, { headers: { origin: "http://localhost:4000" } })).status).toBe(403);
    stop();
    expect(await running).toBe(0);
  });

  it.each([
    [["serve", "--cors", "localhost:3000"], "--cors takes an origin such as http://localhost:3000"],
    [["serve", "--cors", "http://localhost:3000/app"], 'got "http://localhost:3000/app"'],
    [["report", "run", "--cors", "*"], "--allow-host and --cors apply to the server of --watch"],
  ])("refuses %j", (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(UsageError);
    expect(() => parseCommandLine(argv)).toThrow(message);
  });

  it("exits 2 for a bad fault spec and 3 for a port in use, saying what to do", async () => {
    const bad = await io();
    expect(await runCli(["serve", "--faults", "teapot:0.1"], bad)).toBe(2);
    expect(bad.err.join("")).toMatch(/--faults: bad fault "teapot:0.1"/);
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const busy = await io();
      expect(await runCli(["serve", "--port", String(port), "-o", "x"], busy)).toBe(3);
      expect(busy.err.join("")).toMatch(
        new RegExp(`port ${port} on 127.0.0.1 is already in use; choose another with --port, or --port 0`),
      );
    } finally {
      blocker.close();
    }
  });

  it("parses --session-timeout and --memory-budget, 0 turning each off, and documents both", () => {
    expect(parseCommandLine(["serve", "--session-timeout", "30", "--memory-budget", "512"])).toMatchObject({
      sessionTimeoutSeconds: 30,
      memoryBudgetMB: 512,
    });
    expect(parseCommandLine(["serve", "--session-timeout", "0", "--memory-budget", "0"])).toMatchObject({
      sessionTimeoutSeconds: 0,
      memoryBudgetMB: 0,
    });
    expect(parseCommandLine(["serve"])).not.toHaveProperty("sessionTimeoutSeconds");
    for (const bad of ["-1", "x", "", "Infinity"]) {
      expect(() => parseCommandLine(["serve", `--session-timeout=${bad}`])).toThrow(
        `--session-timeout must be a number >= 0 (0: sessions never expire), got "${bad}"`,
      );
      expect(() => parseCommandLine(["serve", `--memory-budget=${bad}`])).toThrow(
        `--memory-budget must be a number >= 0 (0: no budget), got "${bad}"`,
      );
    }
    const help = commandHelp("serve", "1.0.0");
    expect(help).toMatch(
      /--session-timeout SECONDS[\s\S]*default 300[\s\S]*--memory-budget MB[\s\S]*503 memory_budget_exceeded/,
    );
  });

  it("runs as a process that prints its URL and stops cleanly on SIGTERM", async () => {
    const cwd = (await io()).cwd;
    const child = spawn(
      process.execPath,
      ["--import", "tsx", path.resolve("src/cli/main.ts"), "serve", "--port", "0", "-o", cwd],
      { cwd: path.resolve("."), stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await expect.poll(() => out, { timeout: 20_000, interval: 50 }).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
      const url = /http:\/\/127\.0\.0\.1:\d+/.exec(out)![0];
      expect((await fetch(`${url}/health`)).status).toBe(200);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
