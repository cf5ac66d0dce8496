import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FailureLog } from "../../src/outputs/failures.js";
import type { RolloutTask } from "../../src/contracts/task.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

const task = (index: number): RolloutTask => ({
  data: {},
  prompt: "p",
  index,
  epoch: 0,
  batchIndex: 0,
  groupId: `0-${index}`,
  runId: 0,
  groupSize: 1,
  isVal: false,
  seed: 1,
});

describe("FailureLog", () => {
  it("counts a failure as the first of its kind once: messages that differ only in numbers or agent rollout ids are one kind", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-failures-"));
    dirs.push(dir);
    const log = await FailureLog.open(join(dir, "failures.jsonl"), undefined, (text) => text);
    const notFound = (id: string) => new Error(`404 no route POST /rollouts/${id}/chat/completions`);
    const firsts = [
      notFound("r-vyn2E_FJkUFq0hqiKuSgtg"),
      notFound("r-GUJn6aeJWG5482uCIt2xmQ"),
      new Error("row 3 has no field `text`"),
      new Error("row 4 has no field `text`"),
      new Error("row 4 has no field `answer`"),
    ].map((error, i) => log.record({ task: task(i), attempt: 1, error, action: "skip" }, 1).first);
    expect(firsts).toEqual([true, false, true, false, true]);
    await log.flush();
    const rows = (await readFile(log.path, "utf8")).trimEnd().split("\n");
    expect(rows).toHaveLength(5);
    // The file keeps each message as it was.
    expect((JSON.parse(rows[1]!) as { message: string }).message).toBe(
      "404 no route POST /rollouts/r-GUJn6aeJWG5482uCIt2xmQ/chat/completions",
    );
  });
});
