import { spawnSync } from "node:child_process";
import { symlink, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parquetWriteFile } from "hyparquet-writer";
import { describe, expect, it } from "vitest";
import { DataLoader } from "../../src/data/data-loader.js";
import { MAX_LINE_BYTES, readDataFile, readRowTable } from "../../src/data/files.js";
import { RowTable } from "../../src/data/row-table.js";
import type { TaskGroup } from "../../src/contracts/task.js";
import { tempDir, writeJsonl } from "../support/pipeline.js";
import { InputError } from "../../src/errors.js";

const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ prompt: `p${i}`, answer: String(i) }));
/** True when this machine can make a named pipe with `mkfifo` (Linux, macOS). */
const canMakeFifo = spawnSync("mkfifo", ["--version"]).error === undefined;
const indices = (groups: TaskGroup[] | undefined) => groups?.map((g) => g.index);

describe("readDataFile", () => {
  it("reads .jsonl (skipping blank lines), .json arrays and .parquet written by another library", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "a.jsonl"), '{"prompt":"x","n":1}\n\n{"prompt":"y","n":2}\n');
    await writeFile(join(dir, "b.json"), JSON.stringify([{ prompt: "z", n: 3 }]));
    parquetWriteFile({
      filename: join(dir, "c.parquet"),
      columnData: [
        { name: "prompt", data: ["What is 2 + 2?", "What is 3 * 3?"], type: "STRING" },
        { name: "ground_truth", data: ["4", "9"], type: "STRING" },
        { name: "index", data: [10n, 11n], type: "INT64" },
      ],
    });
    expect(await readDataFile(join(dir, "a.jsonl"))).toEqual([
      { prompt: "x", n: 1 },
      { prompt: "y", n: 2 },
    ]);
    expect(await readDataFile(join(dir, "b.json"))).toEqual([{ prompt: "z", n: 3 }]);
    expect(await readDataFile(join(dir, "c.parquet"))).toEqual([
      { prompt: "What is 2 + 2?", ground_truth: "4", index: 10 },
      { prompt: "What is 3 * 3?", ground_truth: "9", index: 11 },
    ]);
  });

  it("names the file and line of bad content, and lists the formats for an unknown extension", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "bad.jsonl"), '{"prompt":"x"}\n{"prompt": oops}\n');
    await writeFile(join(dir, "scalar.jsonl"), '"just text"\n');
    await writeFile(join(dir, "obj.json"), '{"prompt":"x"}');
    await writeFile(join(dir, "data.csv"), "prompt\nx\n");
    await expect(readDataFile(join(dir, "bad.jsonl"))).rejects.toThrow(`${join(dir, "bad.jsonl")}:2 is not valid JSON`);
    await expect(readDataFile(join(dir, "scalar.jsonl"))).rejects.toThrow(
      /scalar\.jsonl:1 is a string; every task must be a JSON object/,
    );
    await expect(readDataFile(join(dir, "obj.json"))).rejects.toThrow(/holds a JSON object, not an array/);
    await expect(readDataFile(join(dir, "data.csv"))).rejects.toThrow(
      /unsupported extension ".csv"; use one of .jsonl, .json, .parquet/,
    );
    await expect(readDataFile(join(dir, "missing.jsonl"))).rejects.toBeInstanceOf(InputError);
  });
});

describe("readRowTable", () => {
  it("streams JSON Lines: lines across read chunks, CRLF, multi-byte characters, no final newline", async () => {
    const dir = await tempDir();
    // Lines longer than the 1 MiB read chunk, and multi-byte characters cut by chunk boundaries.
    const long = "é€😀".repeat(150_000);
    const text = `{"prompt":"a"}\r\n\r\n  \n{"prompt":"${long}"}\n{"prompt":"z","n":[1,2]}`;
    await writeFile(join(dir, "a.jsonl"), text);
    const table = await readRowTable([join(dir, "a.jsonl")]);
    expect(table).toBeInstanceOf(RowTable);
    expect(Array.from({ length: table.length }, (_, i) => table.row(i))).toEqual([
      { prompt: "a" },
      { prompt: long },
      { prompt: "z", n: [1, 2] },
    ]);
    expect([0, 1, 2].map((i) => table.origin(i).label)).toEqual([
      `${join(dir, "a.jsonl")}:1`,
      `${join(dir, "a.jsonl")}:4`,
      `${join(dir, "a.jsonl")}:5`,
    ]);
  });

  it("refuses a file with no line end past 64 MiB at once, and a link to /dev/zero before reading, naming them, instead of filling memory", async () => {
    const dir = await tempDir();
    const refusal = (file: string) =>
      readDataFile(file).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    // A sparse file: 64 MiB and one byte of zeros that take no disk space.
    const zeros = join(dir, "zeros.jsonl");
    await writeFile(zeros, "");
    await truncate(zeros, MAX_LINE_BYTES + 1);
    const error = await refusal(zeros);
    expect(error).toBeInstanceOf(InputError);
    expect(error?.message).toBe(
      `${zeros}: line 1 is longer than 64 MiB with no line end; a JSON Lines file holds one row per line (is it a JSON Lines file?)`,
    );
    const endless = join(dir, "zero.jsonl");
    await symlink("/dev/zero", endless);
    expect((await refusal(endless))?.message).toBe(
      `data file ${endless} is a device, not a regular file; give the path of a .jsonl, .json or .parquet file`,
    );
    // A long line that does end is read.
    const long = join(dir, "long.jsonl");
    await writeFile(long, `{"prompt": "${"a".repeat(3 * 2 ** 20)}"}\n{"prompt": "b"}\n`);
    expect((await readDataFile(long)).map((row) => String(row["prompt"]).length)).toEqual([3 * 2 ** 20, 1]);
  });

  // Opening a named pipe waits for a writer forever (SIGTERM cannot end a read blocked in the
  // thread pool), so a data path that is not a regular file is refused before it is opened.
  it.skipIf(!canMakeFifo)(
    "refuses a named pipe (FIFO) as a data file at once, naming it, instead of waiting for a writer",
    async () => {
      const dir = await tempDir();
      const fifo = join(dir, "train.jsonl");
      expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
      const error = await readRowTable([fifo]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InputError);
      expect((error as Error).message).toBe(
        `data file ${fifo} is a named pipe (FIFO), not a regular file; give the path of a .jsonl, .json or .parquet file`,
      );
    },
  );

  it("reads many files and every parquet row group in order, numbering rows per file", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "a.jsonl"), rows(3));
    await writeFile(join(dir, "b.json"), JSON.stringify(rows(2)));
    parquetWriteFile({
      filename: join(dir, "c.parquet"),
      columnData: [{ name: "prompt", data: Array.from({ length: 2500 }, (_, i) => `q${i}`), type: "STRING" }],
      rowGroupSize: 1000,
    });
    const table = await readRowTable([join(dir, "a.jsonl"), join(dir, "b.json"), join(dir, "c.parquet")]);
    expect(table.length).toBe(2505);
    expect([table.row(2), table.row(4), table.row(5), table.row(2504)]).toEqual([
      rows(3)[2],
      rows(2)[1],
      { prompt: "q0" },
      { prompt: "q2499" },
    ]);
    expect([table.origin(4).label, table.origin(1005).label]).toEqual([
      `${join(dir, "b.json")} item 2`,
      `${join(dir, "c.parquet")} row 1001`,
    ]);
  });
});

describe("DataLoader", () => {
  it("loads 125 000 rows and more: rows held as text, the seeded order the same as before", async () => {
    const dir = await tempDir();
    const file = await writeJsonl(join(dir, "big.jsonl"), rows(200_000));
    const loader = await DataLoader.fromFiles([file], { promptKey: "prompt", batchSize: 4, seed: 3, shuffle: true });
    expect(loader.size).toBe(200_000);
    const batch = loader.nextBatch()!;
    expect(batch.map((g) => g.tasks[0]!.prompt)).toEqual(batch.map((g) => `p${g.index}`));
    expect(batch[0]!.tasks[0]!.data).toEqual({ prompt: `p${batch[0]!.index}`, answer: String(batch[0]!.index) });
  });

  it("keeps the data order and seeds of earlier versions, so that existing runs resume identically", () => {
    // Values from the version that held rows as objects and shuffled an array of indices.
    const data = Array.from({ length: 23 }, (_, i) => ({ prompt: "x".repeat(i % 7), n: i }));
    const loader = new DataLoader(data, {
      promptKey: "prompt",
      batchSize: 23,
      seed: 7,
      shuffle: true,
      filter: { maxPromptLength: 5, measure: (p) => String(p).length },
    });
    expect(indices(loader.nextBatch())).toEqual([
      15, 1, 14, 10, 7, 17, 2, 16, 9, 11, 8, 22, 21, 0, 4, 19, 12, 18, 5, 3,
    ]);
    expect(indices(loader.nextBatch())).toEqual([
      11, 9, 15, 21, 8, 10, 0, 3, 19, 2, 18, 7, 14, 16, 22, 17, 1, 12, 5, 4,
    ]);
    expect(loader.nextGroup()!.tasks.map((t) => t.seed)).toEqual([3608259187]);
  });

  it("names the file and line of a row that is not JSON, not an object or lacks the prompt key", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "a.jsonl"), '{"prompt":"x"}\n\n{"prompt": oops}\n');
    await writeFile(join(dir, "b.jsonl"), '{"prompt":"x"}\n[1]\n');
    const options = { promptKey: "prompt", batchSize: 1, seed: 0 };
    await expect(DataLoader.fromFiles([join(dir, "a.jsonl")], options)).rejects.toThrow(
      `${join(dir, "a.jsonl")}:3 is not valid JSON`,
    );
    await expect(DataLoader.fromFiles([join(dir, "b.jsonl")], options)).rejects.toThrow(
      `${join(dir, "b.jsonl")}:2 is an array; every task must be a JSON object`,
    );
  });

  it("concatenates several files and checks the prompt key, naming the file, the row and its fields", async () => {
    const dir = await tempDir();
    const a = await writeJsonl(join(dir, "a.jsonl"), rows(2));
    const b = await writeJsonl(join(dir, "b.jsonl"), [{ input: "x" }]);
    const loader = await DataLoader.fromFiles([a, a], { promptKey: "prompt", batchSize: 3, seed: 0 });
    expect(loader.size).toBe(4);
    expect(loader.nextBatch()!.map((g) => g.tasks[0]!.prompt)).toEqual(["p0", "p1", "p0"]);
    await expect(DataLoader.fromFiles([a, b], { promptKey: "prompt", batchSize: 1, seed: 0 })).rejects.toThrow(
      `${b}:1 has no field "prompt" (data.prompt_key); its fields are: input`,
    );
  });

  it("hands out prompts that are text or chat messages, and refuses any other prompt value, naming the row", async () => {
    const dir = await tempDir();
    const chat = [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
    ];
    const good = await writeJsonl(join(dir, "good.jsonl"), [{ prompt: "text" }, { prompt: chat }]);
    const loader = await DataLoader.fromFiles([good], { promptKey: "prompt", batchSize: 2, seed: 0 });
    expect(loader.nextBatch()!.map((g) => g.tasks[0]!.prompt)).toEqual(["text", chat]);
    for (const [prompt, shown] of [
      [3, "3"],
      [null, "null"],
      [[{ role: "user", content: [{ type: "text", text: "hi" }] }], '[{"role":"user","content":[{"type":"text"'],
    ] as const) {
      const bad = await writeJsonl(join(dir, `bad-${shown.length}.jsonl`), [{ prompt: "ok" }, { prompt }]);
      const error = await DataLoader.fromFiles([bad], { promptKey: "prompt", batchSize: 1, seed: 0 }).catch((e) => e);
      expect(error).toBeInstanceOf(InputError);
      expect(error.message).toContain(
        `${bad}:2: its prompt field "prompt" (data.prompt_key) must be text or a list of {role, content} chat messages with text content, got ${shown}`,
      );
    }
  });

  it("batches like a PyTorch loader, epoch after epoch, with a short or dropped last batch", () => {
    const keep = new DataLoader(rows(5), { promptKey: "prompt", batchSize: 2, seed: 0 });
    expect([1, 2, 3, 4].map(() => indices(keep.nextBatch()))).toEqual([[0, 1], [2, 3], [4], [0, 1]]);
    expect(keep.nextBatch()![0]!.epoch).toBe(1);
    const drop = new DataLoader(rows(5), { promptKey: "prompt", batchSize: 2, seed: 0, dropLast: true });
    expect([1, 2, 3].map(() => indices(drop.nextBatch()))).toEqual([
      [0, 1],
      [2, 3],
      [0, 1],
    ]);
    expect(drop.batchesPerEpoch).toBe(2);
    const once = new DataLoader(rows(3), { promptKey: "prompt", batchSize: 2, seed: 0, maxEpochs: 1 });
    expect([1, 2, 3].map(() => indices(once.nextBatch()))).toEqual([[0, 1], [2], undefined]);
  });

  it("shuffles with the seed: the same seed gives the same order, each epoch its own permutation", () => {
    const order = (seed: number) => {
      const loader = new DataLoader(rows(10), { promptKey: "prompt", batchSize: 10, seed, shuffle: true });
      return [indices(loader.nextBatch())!, indices(loader.nextBatch())!] as const;
    };
    const [first, second] = order(3);
    expect(order(3)).toEqual([first, second]);
    expect([...first].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(first).not.toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(second).not.toEqual(first);
    expect(order(4)[0]).not.toEqual(first);
  });

  it("repeats each row rollout_repeat_n times: one group id, run ids 0..n-1, distinct seeds", () => {
    const loader = new DataLoader(rows(2), { promptKey: "prompt", batchSize: 2, seed: 1, rolloutRepeatN: 3 });
    const [g0, g1] = loader.nextBatch()!;
    expect(g0!.tasks.map((t) => [t.groupId, t.runId, t.groupSize, t.prompt, t.data.answer])).toEqual([
      ["0-0", 0, 3, "p0", "0"],
      ["0-0", 1, 3, "p0", "0"],
      ["0-0", 2, 3, "p0", "0"],
    ]);
    expect(g1!.groupId).toBe("0-1");
    const seeds = [...g0!.tasks, ...g1!.tasks].map((t) => t.seed);
    expect(new Set(seeds).size).toBe(6);
    expect(loader.nextBatch()![0]!.groupId).toBe("1-0");
  });

  it("drops prompts longer than max_prompt_length and says so when nothing is left", () => {
    const measure = (prompt: unknown) => String(prompt).length;
    const data = [{ prompt: "short" }, { prompt: "a much longer prompt" }, { prompt: "tiny" }];
    const loader = new DataLoader(data, {
      promptKey: "prompt",
      batchSize: 5,
      seed: 0,
      filter: { maxPromptLength: 6, measure },
    });
    expect([loader.size, loader.filtered]).toEqual([2, 1]);
    expect(indices(loader.nextBatch())).toEqual([0, 2]);
    expect(
      () =>
        new DataLoader(
          data,
          { promptKey: "prompt", batchSize: 1, seed: 0, filter: { maxPromptLength: 2, measure } },
          "train.jsonl",
        ),
    ).toThrow("no task left in train.jsonl: all 3 rows have prompts longer than 2 tokens (data.max_prompt_length)");
  });

  it("resumes exactly from a cursor: a new loader continues with the same groups and seeds", () => {
    const options = { promptKey: "prompt", batchSize: 3, seed: 9, shuffle: true, rolloutRepeatN: 2 };
    const a = new DataLoader(rows(7), options);
    a.nextBatch();
    a.nextBatch();
    const cursor = JSON.parse(JSON.stringify(a.cursor()));
    const expected = [a.nextBatch(), a.nextBatch(), a.nextBatch()];
    const b = new DataLoader(rows(7), options);
    b.restore(cursor);
    expect([b.nextBatch(), b.nextBatch(), b.nextBatch()]).toEqual(expected);
    expect(() => b.restore({ ...cursor, position: 99 })).toThrow(/does not fit this dataset of 7 rows/);
  });

  it("streams single groups across epochs, handing requeued rows out first", () => {
    const loader = new DataLoader(rows(3), { promptKey: "prompt", batchSize: 2, seed: 0 });
    const first = [loader.nextGroup()!, loader.nextGroup()!];
    loader.requeue(first[0]!);
    const next = [loader.nextGroup()!, loader.nextGroup()!, loader.nextGroup()!];
    expect(next.map((g) => [g.index, g.epoch, g.batchIndex])).toEqual([
      [0, 0, 1],
      [2, 0, 1],
      [0, 1, 2],
    ]);
    expect(next[0]!.tasks[0]!.seed).not.toBe(first[0]!.tasks[0]!.seed);
    expect(loader.cursor().requeued).toEqual([]);
  });

  it("gives every validation row once per pass, with seeds that depend on the pass", () => {
    const loader = new DataLoader(rows(3), {
      promptKey: "prompt",
      batchSize: 1,
      seed: 0,
      rolloutRepeatN: 2,
      isVal: true,
      shuffle: true,
    });
    const pass0 = loader.allGroups(0);
    expect(pass0.map((g) => [g.groupId, g.tasks.length, g.tasks[0]!.isVal])).toEqual([
      ["val-0", 2, true],
      ["val-1", 2, true],
      ["val-2", 2, true],
    ]);
    expect(loader.allGroups(0)).toEqual(pass0);
    expect(loader.allGroups(1)[0]!.tasks[0]!.seed).not.toBe(pass0[0]!.tasks[0]!.seed);
    expect(loader.cursor().groups).toBe(0);
  });

  it("leaves the rows after the last full batch out of a validation pass with drop_last, a new choice each pass with shuffle", () => {
    const options = { promptKey: "prompt", batchSize: 4, seed: 5, isVal: true, dropLast: true };
    const inOrder = new DataLoader(rows(10), options);
    expect(inOrder.allGroups(0).map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const shuffled = new DataLoader(rows(10), { ...options, shuffle: true });
    const passes = [0, 1, 2, 3].map((pass) => shuffled.allGroups(pass).map((g) => g.index));
    for (const indices of passes) {
      expect(indices).toHaveLength(8);
      expect([...indices].sort((a, b) => a - b)).toEqual(indices);
    }
    expect(new Set(passes.map((p) => p.join())).size).toBeGreaterThan(1);
    expect(shuffled.allGroups(1).map((g) => g.index)).toEqual(passes[1]);
  });

  it("refuses drop_last with fewer rows than one batch: no batch would ever be handed out", () => {
    expect(() => new DataLoader(rows(3), { promptKey: "prompt", batchSize: 4, seed: 0, dropLast: true })).toThrow(
      "has 3 task rows, fewer than data.batch_size (4), and data.drop_last leaves out every batch shorter than that",
    );
    expect(
      () => new DataLoader(rows(3), { promptKey: "prompt", batchSize: 4, seed: 0, dropLast: true, isVal: true }),
    ).toThrow("fewer than validate.data.batch_size (4), and validate.data.drop_last");
  });
});
