/** Issue 13, item 1: a run holds a lock on its output folder. */
import { spawn, spawnSync } from "node:child_process";
import { access, readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { RUN_LOCK_FILE, RunLock } from "../../src/run/run-lock.js";
import {
  readJsonl,
  runCliChild,
  startCli,
  tempDir,
  userProject,
  writeRecipe,
  writeWorker,
} from "../support/user-project.js";
import { RunError } from "../../src/errors.js";

/** The pid of a process that has exited (so not alive on this host, barring reuse). */
function deadPid(): number {
  return spawnSync(process.execPath, ["-e", "0"]).pid!;
}

describe("the output folder lock", () => {
  it("refuses a second run in the same folder, naming the first (pid, host, start time, command), and leaves the first run's files intact", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const secret = "+service.tinker_service.api_key=sk-ON-THE-COMMAND-LINE-1234";
    const first = startCli(["-c", "recipe.yaml", "-r", "-o", out, "trainer.total_train_steps=500", secret], {
      cwd: dir,
    });
    await first.waitFor("step 1/500");
    const lockFile = await readFile(join(out, RUN_LOCK_FILE), "utf8");
    expect(lockFile).toContain("api_key=***");
    expect(lockFile).not.toContain("sk-ON-THE-COMMAND-LINE");
    const second = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out, "trainer.total_train_steps=500"], {
      cwd: dir,
    });
    expect(second.code).toBe(EXIT_CODES.outputDir);
    expect(second.stderr).toContain(
      `the output folder ${out} is in use by another run: pid ${first.child.pid} on ${hostname()}, started 20`,
    );
    expect(second.stderr).toMatch(/main\.js -c recipe\.yaml -r -o \S+ trainer\.total_train_steps=500/);
    expect(second.stderr.trim().split("\n")).toHaveLength(1);
    first.child.kill("SIGINT");
    const ended = await first.done;
    expect(ended.code).toBe(EXIT_CODES.interrupted);
    const steps = (await readJsonl<{ step: number }>(join(out, "metrics.jsonl"))).map((row) => row.step);
    expect(steps).toEqual(steps.map((_, i) => i + 1));
    await expect(access(join(out, RUN_LOCK_FILE))).rejects.toThrow();
  });

  it("takes over the lock of a process that is gone, so a killed run resumes at once", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const out = join(dir, "out");
    const first = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "trainer.save_freq=1", "trainer.total_train_steps=2"],
      {
        cwd: dir,
      },
    );
    expect(first.code).toBe(0);
    const stale = {
      pid: deadPid(),
      host: hostname(),
      startedAt: "2020-01-01T00:00:00.000Z",
      command: "nexrl (killed)",
    };
    await writeFile(join(out, RUN_LOCK_FILE), JSON.stringify(stale));
    const resumed = await runCliChild(
      ["-c", "recipe.yaml", "-r", "-o", out, "trainer.save_freq=1", "trainer.total_train_steps=4", "resume.mode=auto"],
      { cwd: dir },
    );
    expect(resumed.stderr).toBe("");
    expect(resumed.code).toBe(EXIT_CODES.ok);
    expect(resumed.stdout).toContain("resuming from");
    expect(resumed.stdout).toContain("done after step 4");
    await expect(access(join(out, RUN_LOCK_FILE))).rejects.toThrow();
  });
});

describe("RunLock", () => {
  it("refuses a second holder in the same process and on the same host, and is taken again once released", async () => {
    const dir = await tempDir();
    const lock = await RunLock.acquire(dir, "first");
    const refused = await RunLock.acquire(dir, "second").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RunError);
    expect((refused as RunError).holder).toMatchObject({
      pid: process.pid,
      host: hostname(),
      command: "first",
    });
    const content = JSON.parse(await readFile(join(dir, RUN_LOCK_FILE), "utf8")) as Record<string, unknown>;
    expect(content).toMatchObject({ pid: process.pid, host: hostname(), command: "first" });
    await lock.release();
    await expect(access(join(dir, RUN_LOCK_FILE))).rejects.toThrow();
    await (await RunLock.acquire(dir, "third")).release();
  });

  it("treats a lock from another host as live, a dead pid or a pid of another process start as stale, and a garbled file as stale", async () => {
    const dir = await tempDir();
    const path = join(dir, RUN_LOCK_FILE);
    const other = { pid: process.pid, host: `not-${hostname()}`, startedAt: "2020-01-01T00:00:00.000Z", command: "x" };
    await writeFile(path, JSON.stringify(other));
    expect(await RunLock.acquire(dir).catch((e: unknown) => e)).toBeInstanceOf(RunError);
    if (process.platform === "linux") {
      // pid 1 is alive, but it started at another time than the lock says (read from /proc): the pid was reused.
      await writeFile(path, JSON.stringify({ ...other, host: hostname(), pid: 1, startTicks: -5 }));
      await (await RunLock.acquire(dir)).release();
    }
    await writeFile(path, JSON.stringify({ ...other, host: hostname(), pid: deadPid() }));
    await (await RunLock.acquire(dir)).release();
    await writeFile(path, "{not json");
    await (await RunLock.acquire(dir)).release();
  });

  it("lets exactly one of several processes racing for a stale lock take it", async () => {
    const dir = await tempDir();
    await writeFile(
      join(dir, RUN_LOCK_FILE),
      JSON.stringify({ pid: deadPid(), host: hostname(), startedAt: "2020-01-01T00:00:00.000Z", command: "dead" }),
    );
    // The winner holds the lock until every process has answered (then it is killed).
    const script = `
      const { RunLock } = await import(${JSON.stringify(join(import.meta.dirname, "../../dist/run/run-lock.js"))});
      try { await RunLock.acquire(${JSON.stringify(dir)}); console.log("took"); setInterval(() => {}, 1000); }
      catch (e) { console.log(e.constructor.name); }`;
    const children = Array.from({ length: 4 }, () =>
      spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] }),
    );
    const runs = await Promise.all(
      children.map(
        (child) =>
          new Promise<string>((resolve) => {
            let out = "";
            child.stdout.on("data", (c: Buffer) => {
              out += c;
              if (out.includes("\n")) resolve(out.trim());
            });
          }),
      ),
    );
    for (const child of children) child.kill("SIGKILL");
    expect(runs.filter((r) => r === "took")).toHaveLength(1);
    expect(runs.filter((r) => r === "RunError")).toHaveLength(3);
  });
});
