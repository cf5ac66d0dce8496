/**
 * Reads task rows from data files: JSON Lines, JSON arrays and Parquet, into a compact
 * {@link RowTable}. JSON Lines files are streamed and Parquet files read one row group at a time,
 * so a file of millions of rows is never held as text and objects at once.
 * @module
 */
import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import type { Stats } from "node:fs";
import { extname } from "node:path";
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, toJson } from "hyparquet";
import { RowTableBuilder, type RowTable } from "./row-table.js";
import type { DataRow } from "../contracts/task.js";
import { InputError } from "../errors.js";

/** File extensions {@link readDataFile} understands. */
export const DATA_FILE_EXTENSIONS = [".jsonl", ".json", ".parquet"] as const;

const NEWLINE = 0x0a;

/**
 * Longest line of a JSON Lines file, in bytes: far above any real task row (a long document with
 * its conversation), and low enough that a file with no line ends (a link to /dev/zero, a
 * binary file) is refused at once instead of filling memory.
 */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

function lineTooLong(file: string, line: number): InputError {
  return new InputError(
    `${file}: line ${line} is longer than ${MAX_LINE_BYTES / 2 ** 20} MiB with no line end; a JSON Lines file holds one row per line (is it a JSON Lines file?)`,
  );
}

/** True when `bytes[start, end)` holds only spaces, tabs and carriage returns. */
function isBlank(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    if (b !== 0x20 && b !== 0x09 && b !== 0x0d) return false;
  }
  return true;
}

/** Streams `file` line by line into `table`, skipping blank lines; rows are checked when parsed. */
async function readJsonLines(file: string, table: RowTableBuilder): Promise<void> {
  table.beginFile(file, "line");
  let line = 0;
  const addLine = (bytes: Uint8Array, start: number, end: number): void => {
    line++;
    if (!isBlank(bytes, start, end)) table.addBytes(bytes, start, end, line);
  };
  // The start of a line that chunk boundaries cut, waiting for its end.
  const carry: Buffer[] = [];
  let carried = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    const data = chunk as Buffer;
    let from = 0;
    let end = data.indexOf(NEWLINE);
    if (carry.length > 0) {
      if (end < 0) {
        carried += data.length;
        if (carried > MAX_LINE_BYTES) throw lineTooLong(file, line + 1);
        carry.push(data);
        continue;
      }
      const joined = Buffer.concat([...carry, data.subarray(0, end)]);
      carry.length = 0;
      carried = 0;
      addLine(joined, 0, joined.length);
      from = end + 1;
      end = data.indexOf(NEWLINE, from);
    }
    for (; end >= 0; end = data.indexOf(NEWLINE, from)) {
      addLine(data, from, end);
      from = end + 1;
    }
    if (from < data.length) {
      carry.push(data.subarray(from));
      carried += data.length - from;
    }
  }
  if (carry.length > 0) {
    const last = Buffer.concat(carry);
    addLine(last, 0, last.length);
  }
}

async function readJsonArray(file: string, table: RowTableBuilder): Promise<void> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new InputError(
      `${file} is not valid JSON (${(error as Error).message}); a .json data file holds an array of task objects`,
    );
  }
  if (!Array.isArray(value))
    throw new InputError(
      `${file} holds a JSON ${typeof value}, not an array; a .json data file holds an array of task objects (use .jsonl for one object per line)`,
    );
  table.beginFile(file, "item");
  for (const item of value) table.addText(JSON.stringify(item));
}

async function readParquet(file: string, table: RowTableBuilder): Promise<void> {
  table.beginFile(file, "row");
  try {
    const source = await asyncBufferFromFile(file);
    const metadata = await parquetMetadataAsync(source);
    let rowStart = 0;
    for (const group of metadata.row_groups) {
      const rowEnd = rowStart + Number(group.num_rows);
      const rows = await parquetReadObjects({ file: source, metadata, rowStart, rowEnd });
      // 64-bit integers arrive as BigInt; JSON-compatible values keep rows printable and comparable.
      for (const row of rows) table.addText(JSON.stringify(toJson(row)));
      rowStart = rowEnd;
    }
  } catch (error) {
    throw new InputError(
      `cannot read parquet file ${file}: ${(error as Error).message} (nexrl reads uncompressed and snappy-compressed parquet)`,
      { cause: error },
    );
  }
}

/** What a path that is not a regular file is, for the refusal. */
function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return "a folder";
  if (stats.isFIFO()) return "a named pipe (FIFO)";
  if (stats.isSocket()) return "a socket";
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return "a device";
  return "not a file";
}

/**
 * Refuses a path that is not a regular file before it is opened: opening a named pipe waits for a
 * writer forever (in the thread pool, where no signal reaches it) and a device never ends.
 */
async function checkRegularFile(file: string): Promise<void> {
  const stats = await stat(file);
  if (!stats.isFile())
    throw new InputError(
      `data file ${file} is ${fileKind(stats)}, not a regular file; give the path of a .jsonl, .json or .parquet file`,
    );
}

async function readInto(file: string, table: RowTableBuilder): Promise<void> {
  const ext = extname(file).toLowerCase();
  try {
    await checkRegularFile(file);
    switch (ext) {
      case ".jsonl":
        return await readJsonLines(file, table);
      case ".json":
        return await readJsonArray(file, table);
      case ".parquet":
        return await readParquet(file, table);
    }
  } catch (error) {
    if (error instanceof InputError) throw error;
    throw new InputError(`cannot read data file ${file}: ${(error as Error).message}`, { cause: error });
  }
  throw new InputError(
    `data file ${file} has an unsupported extension "${ext}"; use one of ${DATA_FILE_EXTENSIONS.join(", ")}`,
  );
}

/**
 * The rows of `files`, in order, as a compact {@link RowTable}: `.jsonl` (one JSON object per
 * line, blank lines skipped; streamed), `.json` (an array of objects) or `.parquet` (each row an
 * object, read one row group at a time; 64-bit integers become numbers). Rows are checked when
 * parsed ({@link RowTable.row}), naming the file and line of bad content.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the file for an unknown extension or a file that cannot
 * be read, or that is not a JSON array (`.json`) or Parquet.
 */
export async function readRowTable(files: readonly string[]): Promise<RowTable> {
  const table = new RowTableBuilder();
  for (const file of files) await readInto(file, table);
  return table.finish();
}

/**
 * The rows of one data file, chosen by extension (see {@link readRowTable}), parsed into objects.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the file (and line) for an unknown extension, a file that
 * cannot be read or parsed, or a record that is not an object.
 */
export async function readDataFile(file: string): Promise<DataRow[]> {
  const table = await readRowTable([file]);
  const rows: DataRow[] = [];
  for (let i = 0; i < table.length; i++) rows.push(table.row(i));
  return rows;
}
