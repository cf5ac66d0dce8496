/**
 * `logger.backend: [tensorboard]`: the event files a run writes, read back with a TFRecord and
 * protocol buffer reader of the test's own (CRC-32C computed bit by bit, not with the table the
 * writer uses), compared with `metrics.jsonl` step by step; and a resume's file that tells
 * TensorBoard to drop the steps it writes again.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../../src/run/run-recipe.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../../support/pipeline.js";

function crc32cBitwise(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const unmask = (masked: number): number => {
  const rotated = (masked - 0xa282ead8) >>> 0;
  return ((rotated >>> 17) | (rotated << 15)) >>> 0;
};

/** The records of a TFRecord file, each checked against its two CRCs. */
function tfRecords(file: Buffer): Buffer[] {
  const records: Buffer[] = [];
  for (let at = 0; at < file.length;) {
    const length = Number(file.readBigUInt64LE(at));
    expect(unmask(file.readUInt32LE(at + 8))).toBe(crc32cBitwise(file.subarray(at, at + 8)));
    const data = file.subarray(at + 12, at + 12 + length);
    expect(unmask(file.readUInt32LE(at + 12 + length))).toBe(crc32cBitwise(data));
    records.push(data);
    at += 16 + length;
  }
  return records;
}

type Field = { field: number; value: number | Buffer };

/** The fields of a protocol buffer message (varint, 64-bit, length-delimited and 32-bit values). */
function fields(message: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 1; ; shift *= 128) {
      const byte = message[at++]!;
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < message.length) {
    const key = varint();
    const [field, type] = [Math.floor(key / 8), key % 8];
    if (type === 0) out.push({ field, value: varint() });
    else if (type === 1) {
      out.push({ field, value: message.readDoubleLE(at) });
      at += 8;
    } else if (type === 5) {
      out.push({ field, value: message.readFloatLE(at) });
      at += 4;
    } else if (type === 2) {
      const length = varint();
      out.push({ field, value: message.subarray(at, at + length) });
      at += length;
    } else throw new Error(`wire type ${type}`);
  }
  return out;
}

interface Event {
  step: number;
  fileVersion?: string;
  sessionStart?: boolean;
  values?: Record<string, number>;
}

/** The `tensorflow.Event`s of an event file. */
function events(file: Buffer): Event[] {
  return tfRecords(file).map((record) => {
    const event: Event = { step: 0 };
    for (const { field, value } of fields(record)) {
      if (field === 1) expect(value).toBeGreaterThan(1.7e9); // wall_time, in seconds
      if (field === 2) event.step = value as number;
      if (field === 3) event.fileVersion = (value as Buffer).toString("utf8");
      if (field === 6) event.sessionStart = fields(value as Buffer).some((f) => f.field === 1 && f.value === 1);
      if (field === 5) {
        event.values = {};
        for (const entry of fields(value as Buffer)) {
          const parts = fields(entry.value as Buffer);
          const tag = (parts.find((p) => p.field === 1)!.value as Buffer).toString("utf8");
          event.values[tag] = parts.find((p) => p.field === 2)!.value as number;
        }
      }
    }
    return event;
  });
}

/** Event files of `dir`, oldest first. */
async function eventFiles(dir: string): Promise<Event[][]> {
  const names = (await readdir(dir)).filter((n) => n.startsWith("events.out.tfevents.")).sort();
  return Promise.all(names.map(async (name) => events(await readFile(join(dir, name)))));
}

describe("the TensorBoard logger", () => {
  it("writes every step's numeric metrics as float32 scalars, and a resume's file restarts at its first step", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
    const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 2, extra: "logger: {backend: [tensorboard]}\n" }), [
      "trainer.save_freq=2",
    ]);
    const out = join(dir, "out");
    const first = await runRecipe(recipe, { outputDir: out });
    expect(first.steps).toBe(2);
    const resumed = await runRecipe(recipe.path, {
      outputDir: out,
      overrides: ["trainer.save_freq=2", "trainer.total_train_steps=3", "resume.mode=auto"],
    });
    expect(resumed.steps).toBe(3);
    const [before, after] = await eventFiles(out);
    expect(before!.slice(0, 2)).toEqual([
      { step: 0, fileVersion: "brain.Event:2" },
      { step: 0, sessionStart: true },
    ]);
    expect(after!.slice(0, 2)).toEqual([
      { step: 0, fileVersion: "brain.Event:2" },
      { step: 3, sessionStart: true },
    ]);
    const metrics = (await readFile(join(out, "metrics.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number | null>);
    const logged = [...before!.slice(2), ...after!.slice(2)];
    expect(logged.map((e) => e.step)).toEqual([1, 2, 3]);
    logged.forEach((event, i) => {
      const row = metrics[i]!;
      const expected = Object.fromEntries(
        Object.entries(row).flatMap(([tag, value]) =>
          tag !== "step" && typeof value === "number" && Number.isFinite(value) ? [[tag, Math.fround(value)]] : [],
        ),
      );
      expect(Object.keys(expected).length).toBeGreaterThan(10);
      expect(event.values).toEqual(expected);
    });
    expect(logged[0]!.values).toHaveProperty("rollout/reward_mean");
  });
});
