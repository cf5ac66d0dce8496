/**
 * `nexrl serve` as a process (the built CLI): addresses it cannot bind get a one-line cause and
 * the exit code of the mistake (2: a flag that can never work; 3: the environment refused), and
 * a stop by Ctrl-C or SIGTERM removes the temporary folder it made.
 */
import { access, readdir, readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { ADAM, call, runCli, startCli, tempDir, tinkerModel } from "./serve-helpers.js";
import { unprivilegedUser, type Unprivileged } from "./unprivileged.js";

/** Expects a single `nexrl: …` line on stderr, with no stack trace and no "unexpected error". */
function expectOneLine(stderr: string, message: RegExp): void {
  expect(stderr).toMatch(/^nexrl: [^\n]+\n$/);
  expect(stderr).toMatch(message);
  expect(stderr).not.toMatch(/unexpected error|\n\s+at /);
}

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

/** The unprivileged user to run a child as when this process is root (privileged ports are open to root). */
async function unprivileged(): Promise<Unprivileged> {
  const start = Number(
    (await readFile("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8").catch(() => "1024")).trim(),
  );
  if (start <= 80) return { skip: `every user may bind port 80 here (ip_unprivileged_port_start is ${start})` };
  return unprivilegedUser();
}

describe("nexrl serve: addresses it cannot bind", () => {
  it("exits 2 for a host that is not an address (--host 999.1.1.1)", async () => {
    const { code, stdout, stderr } = await runCli(["serve", "--host", "999.1.1.1", "--port", "0"]);
    expect(code).toBe(EXIT_CODES.usage);
    expectOneLine(
      stderr,
      /^nexrl: cannot listen on 999\.1\.1\.1: it is not an IP address, and no host of that name resolves \(E[A-Z_]+\); give --host an address of this machine/,
    );
    expect(stdout).toBe("");
  });

  it("exits 2 for an address of no interface of this machine", async () => {
    const { code, stderr } = await runCli(["serve", "--host", "192.0.2.1", "--port", "0", "--api-key", "k-123456"]);
    expect(code).toBe(EXIT_CODES.usage);
    expectOneLine(stderr, /cannot listen on 192\.0\.2\.1: no network interface of this machine has that address/);
  });

  it("exits 3 for a port in use", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const { port } = blocker.address() as { port: number };
    try {
      const { code, stderr } = await runCli(["serve", "--port", String(port)]);
      expect(code).toBe(EXIT_CODES.runFailed);
      expectOneLine(
        stderr,
        new RegExp(
          `^nexrl: port ${port} on 127\\.0\\.0\\.1 is already in use; choose another with --port, or --port 0`,
        ),
      );
    } finally {
      blocker.close();
    }
  });

  it("exits 3 for a privileged port without the privilege", async (ctx) => {
    const user = await unprivileged();
    if ("skip" in user) {
      console.warn(`skipped: ${user.skip}`);
      ctx.skip();
      return;
    }
    const { code, stderr } = await runCli(["serve", "--port", "80"], { uid: user.uid, gid: user.gid, cwd: tmpdir() });
    expect(code).toBe(EXIT_CODES.runFailed);
    expectOneLine(
      stderr,
      /^nexrl: no permission to listen on port 80 of 127\.0\.0\.1 \(ports below 1024 need root or CAP_NET_BIND_SERVICE\); use --port 1024 or above/,
    );
  });

  it("exits 2 for an empty --api-key", async () => {
    const { code, stderr } = await runCli(["serve", "--api-key", ""]);
    expect(code).toBe(EXIT_CODES.usage);
    expectOneLine(stderr, /--api-key is empty/);
  });
});

describe("nexrl serve: stopping", () => {
  it("exits 0 and removes its folder after Ctrl-C while an operation waits for a skipped seq_id", async () => {
    const scratch = await tempDir();
    const cli = startCli(["serve", "--port", "0"], { env: { TMPDIR: scratch } });
    await expect.poll(cli.stdout, { timeout: 20_000 }).toMatch(/on (http:\/\/127\.0\.0\.1:\d+)/);
    const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(cli.stdout())![1]!;
    const { modelId } = await tinkerModel(url);
    // seq_id 5 while 1 to 4 never came: the server holds it until they do.
    const held = await call(url, "POST", "/api/v1/optim_step", {
      model_id: modelId,
      seq_id: 5,
      adam_params: ADAM,
      type: "optim_step",
    });
    expect(held.status).toBe(200);
    cli.kill("SIGINT");
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(await readdir(scratch)).toEqual([]);
    expect(cli.stderr()).toBe("");
  });

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`removes its temporary folder after ${signal} and exits 0`, async () => {
      const scratch = await tempDir();
      const cli = startCli(["serve", "--port", "0"], { env: { TMPDIR: scratch } });
      await expect.poll(cli.stdout, { timeout: 20_000 }).toMatch(/files in (\S+) \(removed on exit\)/);
      const folder = /files in (\S+) \(removed on exit\)/.exec(cli.stdout())![1]!;
      expect(path.dirname(folder)).toBe(scratch);
      expect(path.basename(folder)).toMatch(/^nexrl-serve-/);
      const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(cli.stdout())![1]!;
      // A model writes into the folder, so there is something to remove.
      const session = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
      const model = await call(url, "POST", `/api/v1/sessions/${session.body.id}/models`, {
        model_seq_id: 1,
        base_model: "tiny",
      });
      const saved = await call(url, "POST", `/api/v1/models/${model.body.id}/checkpoints`, {
        type: "weight",
        name: "c",
      });
      let op = saved.body;
      while (op.status !== "done") op = (await call(url, "GET", `/api/v1/operations/${saved.body.id}`)).body;
      expect(await exists(folder)).toBe(true);
      cli.kill(signal);
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      expect(await readdir(scratch)).toEqual([]);
      expect(cli.stderr()).toBe("");
    });
  }

  it("keeps a folder given with --output-dir", async () => {
    const dir = await tempDir();
    const cli = startCli(["serve", "--port", "0", "-o", path.join(dir, "files")]);
    await expect.poll(cli.stdout, { timeout: 20_000 }).toContain(`files in ${path.join(dir, "files")}\n`);
    cli.kill("SIGTERM");
    expect((await cli.exited).code).toBe(0);
    // Nothing was written, so the folder may not exist; the parent the user gave is never removed.
    expect(await exists(dir)).toBe(true);
  });

  it("removes its temporary folder when it cannot start", async () => {
    const scratch = await tempDir();
    const { code } = await runCli(["serve", "--host", "999.1.1.1"], { env: { TMPDIR: scratch } });
    expect(code).toBe(EXIT_CODES.usage);
    expect(await readdir(scratch)).toEqual([]);
  });
});
