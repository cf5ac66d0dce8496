/**
 * Issue 27, item 10: a full disk. The error names the file it could not write and the way out
 * (Node's own "ENOSPC: no space left on device, write" names neither); the temporary file of the
 * write that failed is removed; a resume after space is freed is exact; and the half-written files
 * a killed process leaves are removed at the next start, with a warning. Item 12: a new output
 * folder on a read-only disk says so (Node's recursive mkdir says ENOENT). The disks are real
 * tmpfs mounts made for the test: they need root (CAP_SYS_ADMIN), and the tests are skipped,
 * saying so, where none can be mounted.
 */
import { execFileSync } from "node:child_process";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { readJsonl, runCliChild, tempDir, userProject, writeRecipe, writeWorker } from "./run-helpers.js";

const mounted: string[] = [];
afterAll(() => {
  for (const dir of mounted) execFileSync("umount", [dir]);
});

/** A tmpfs mounted with `options` on a new folder, or why one cannot be mounted here. */
async function smallDisk(options: string): Promise<{ dir: string } | { skip: string }> {
  const dir = await tempDir("file");
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", dir], { stdio: "pipe" });
  } catch (error) {
    return { skip: `cannot mount a small tmpfs here (needs root): ${(error as Error).message.split("\n")[0]}` };
  }
  mounted.push(dir);
  return { dir };
}

/** Every file under `dir`, as paths relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

const disk = await smallDisk("size=1m");

describe.skipIf("skip" in disk)(`a full disk${"skip" in disk ? ` (skipped: ${disk.skip})` : ""}`, () => {
  it("names the file and the way out, leaves no temporary, and a resume with space is exact", async () => {
    const diskDir = (disk as { dir: string }).dir;
    const project = await userProject();
    await writeWorker(project);
    await writeRecipe(project);
    const out = join(diskDir, "out");
    // tiny's training state is 454 KB a checkpoint: the second one does not fit in 1 MiB.
    const args = ["-c", "recipe.yaml", "-r", "-o", out, "trainer.save_freq=1", "trainer.total_train_steps=4"];
    const full = await runCliChild(args, { cwd: project });
    expect(full.code, full.stderr).toBe(EXIT_CODES.runFailed);
    expect(full.stderr).toMatch(
      new RegExp(
        `^nexrl: cannot write ${out}/(checkpoints|sampler_weights)/\\S+: no space is left on its disk \\(ENOSPC\\); free space on that disk, or choose a folder elsewhere, and try again$`,
        "m",
      ),
    );
    expect(full.stdout + full.stderr).toContain("a resume (resume.mode=auto) continues from the checkpoint of step 1");
    expect(full.stderr).not.toContain("a bug in nexrl");
    const afterFailure = await filesUnder(out);
    expect(afterFailure.filter((f) => f.endsWith(".tmp"))).toEqual([]);

    // Space freed (the disk grown), and the half-written files a killed process would have left.
    execFileSync("mount", ["-o", "remount,size=8m", diskDir]);
    const leftovers = ["sampler_weights/.0123456789ab.tmp", "checkpoints/step_000002.json.tmp"];
    await mkdir(join(out, "sampler_weights"), { recursive: true });
    for (const file of leftovers) await writeFile(join(out, file), "half");
    const resumed = await runCliChild([...args, "resume.mode=auto"], { cwd: project });
    expect(resumed.code, resumed.stderr).toBe(EXIT_CODES.ok);
    expect(resumed.stdout + resumed.stderr).toContain(
      `removed 2 half-written files an earlier run left when it stopped mid-write: ${leftovers[1]}, ${leftovers[0]}`,
    );
    const files = await filesUnder(out);
    expect(files.filter((f) => f.endsWith(".tmp"))).toEqual([]);
    const metrics = await readJsonl<{ step: number }>(join(out, "metrics.jsonl"));
    expect(metrics.map((row) => row.step)).toEqual([1, 2, 3, 4]);
  });
});

const readOnly = await smallDisk("size=64k,ro");

describe.skipIf("skip" in readOnly)(
  `a read-only disk${"skip" in readOnly ? ` (skipped: ${readOnly.skip})` : ""}`,
  () => {
    it("refuses a new output folder in it, saying the file system is read-only", async () => {
      const project = await userProject();
      await writeWorker(project);
      await writeRecipe(project);
      const out = join((readOnly as { dir: string }).dir, "runs", "first");
      const result = await runCliChild(["-c", "recipe.yaml", "-r", "-o", out], { cwd: project });
      expect(result.code, result.stderr).toBe(EXIT_CODES.outputDir);
      expect(result.stderr).toContain(
        `nexrl: cannot write to the output folder ${out}: it is on a read-only file system (EROFS); choose another with --output-dir (or NEXRL_STORAGE_PATH)`,
      );
    });
  },
);
