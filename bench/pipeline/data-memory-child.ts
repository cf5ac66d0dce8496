/**
 * The data-loading row of the pipeline suite, in its own process (forked with --expose-gc by the
 * suite): memory a `DataLoader` holds for a large JSON Lines file, or (`objects` mode, for
 * comparison) what the same rows take as parsed objects in an array. Reads memory (heap used plus
 * external buffers, after full collections) before and after loading, and the peak RSS, and
 * sends `{ rows, fileBytes, retainedBytes, peakRssBytes, baseRssBytes, loadMs }` to the parent.
 *
 * Arguments: mode (`loader` or `objects`), the data file, its row count.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import process from "node:process";
import { createInterface } from "node:readline";
import { DataLoader } from "../../dist/data/data-loader.js";

const [mode, file, rowsArg] = process.argv.slice(2) as [string, string, string];
const rows = Number(rowsArg);

const gc = globalThis.gc;
if (!gc) throw new Error("run with --expose-gc");
const held = (): number => {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};

/** The rows as parsed objects, which is what the loader held before it kept rows as text. */
async function parsedObjects(): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (line.trim() !== "") out.push(JSON.parse(line));
  }
  return out;
}

const before = held();
const baseRssBytes = process.memoryUsage().rss;
const t0 = performance.now();
let keep: unknown;
if (mode === "loader") {
  const loader = await DataLoader.fromFiles([file], { promptKey: "prompt", batchSize: 8, seed: 1, shuffle: true });
  if (loader.size !== rows) throw new Error(`the loader holds ${loader.size} rows, expected ${rows}`);
  // The first batch draws the epoch's order, which the loader keeps while the epoch runs.
  loader.nextBatch();
  keep = loader;
} else {
  const objects = await parsedObjects();
  if (objects.length !== rows) throw new Error(`parsed ${objects.length} rows, expected ${rows}`);
  keep = objects;
}
const loadMs = performance.now() - t0;
const retainedBytes = held() - before;
const peakRssBytes = process.resourceUsage().maxRSS * 1024;
if (keep === undefined) throw new Error("unreachable");
process.send!({ rows, fileBytes: (await stat(file)).size, retainedBytes, peakRssBytes, baseRssBytes, loadMs });
