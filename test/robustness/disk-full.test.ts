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
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { StorageError, storageError } from "../../src/errors.js";
import { writeFiles } from "../../src/export/write-files.js";
import { JsonlLog } from "../../src/outputs/jsonl-log.js";
import { TensorBoardLogger } from "../../src/outputs/loggers/tensorboard.js";
import { readJsonl, runCliChild, tempDir, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

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

const tiny = await smallDisk("size=64k");

describe.skipIf("skip" in tiny)(
  `the writers on a full disk, in process${"skip" in tiny ? ` (skipped: ${tiny.skip})` : ""}`,
  () => {
    it("refuse with StorageError naming the file; the TensorBoard logger keeps its records until there is room", async () => {
      const dir = (tiny as { dir: string }).dir;
      await writeFile(join(dir, "filler"), Buffer.alloc(60 * 1024));
      const log = await JsonlLog.open<{ step: number; text: string }>(join(dir, "metrics.jsonl"));
      const failure = await log.append({ step: 1, text: "x".repeat(16 * 1024) }).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StorageError);
      expect(failure).toMatchObject({ problem: "disk_full", path: join(dir, "metrics.jsonl") });
      const exported = await writeFiles(join(dir, "export"), [["big.bin", new Uint8Array(32 * 1024)]]).catch(
        (error: unknown) => error,
      );
      expect(exported).toMatchObject({ problem: "disk_full", path: join(dir, "export", "big.bin") });
      const warnings: string[] = [];
      const logger = await TensorBoardLogger.open(dir, 0, (line) => warnings.push(line));
      const wide = Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`metric/${i}`, i]));
      await logger.step({ step: 1, ...wide });
      await logger.step({ step: 2, ...wide });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^the TensorBoard logger could not write \(cannot write \S+: no space is left on its disk/,
      );
      execFileSync("mount", ["-o", "remount,size=1m", dir]);
      await logger.step({ step: 3, ...wide });
      const file = await readFile(logger.path);
      // Whole records only: each is a length, its CRC, the data and its CRC; steps 1 to 3 all there.
      const steps: number[] = [];
      for (let at = 0; at < file.length;) {
        const length = Number(file.readBigUInt64LE(at));
        const data = file.subarray(at + 12, at + 12 + length);
        if (data[9] === 0x10) steps.push(data[10]!); // after wall_time (tag and 8 bytes): step
        at += 16 + length;
      }
      expect(steps).toEqual([0, 1, 2, 3]);
      expect(storageError("x", Object.assign(new Error("gone"), { code: "ENOENT" }))).toBeInstanceOf(Error);
      expect(storageError("x", Object.assign(new Error("gone"), { code: "ENOENT" }))).not.toBeInstanceOf(StorageError);
    });
  },
);
