/** The run files a resume reads: run-state checksums and the rows of metrics and samples logs it keeps or drops. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RunError } from "../../src/errors.js";
import { readRunState } from "../../src/outputs/checkpoint.js";
import { JsonlLog } from "../../src/outputs/jsonl-log.js";

const folders: string[] = [];
afterEach(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});
async function folder(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-run-files-"));
  folders.push(dir);
  return dir;
}

describe("run-state checksums", () => {
  it("says there is no earlier checkpoint when the first one is damaged", async () => {
    const dir = await folder();
    const path = join(dir, "step_000001.json");
    const stored = { format: "nexrl.run-state", version: 2, step: 1, session: 1, checksum: "crc32:00000000" };
    await writeFile(path, JSON.stringify(stored));
    const error = await readRunState(path).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RunError);
    expect((error as RunError).problem).toBe("damaged_checkpoint");
    expect((error as Error).message).toContain(
      `no earlier checkpoint is in ${dir}: delete ${path} and start the run again`,
    );
  });
});

describe("JsonlLog.open on resume", () => {
  it("keeps rows through the checkpoint's step and names each line it drops and why", async () => {
    const path = join(await folder(), "metrics.jsonl");
    const lines = ['{"step":1,"a":1}', '{"a":2}', "[3]", '{"step":2,"a":2}', '{"step":3,"a":3}', '{"step":4,"a', '{"a'];
    await writeFile(path, `${lines.join("\n")}\n`);
    const warnings: string[] = [];
    const log = await JsonlLog.open(path, 2, (message) => warnings.push(message));
    expect(log.rows.map((row) => row.step)).toEqual([1, 2]);
    expect(warnings).toEqual([
      `${path} line 2 has no step: the resume drops it`,
      `${path} line 3 is not a JSON object ([3]): the resume drops it`,
      `${path} line 6 is cut short (the process stopped or the disk filled while writing it): the resume drops it; step 4 is past the checkpoint (step 2) and will be logged again`,
      `${path} line 7 is cut short (the process stopped or the disk filled while writing it): the resume drops it; its step cannot be read`,
    ]);
    // The file now holds what was kept, ready for the resumed run's rows.
    expect(await readFile(path, "utf8")).toBe('{"step":1,"a":1}\n{"step":2,"a":2}\n');
  });
});
