/**
 * Reads task rows from data files: JSON Lines, JSON arrays and Parquet.
 * @module
 */
import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import { asyncBufferFromFile, parquetReadObjects, toJson } from "hyparquet";
import { DataLoaderError } from "../errors.js";

/** One task row: the fields of a data file's record. */
export type DataRow = Record<string, unknown>;

/** File extensions {@link readDataFile} understands. */
export const DATA_FILE_EXTENSIONS = [".jsonl", ".json", ".parquet"] as const;

function asRow(value: unknown, where: string): DataRow {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
    throw new DataLoaderError(
      `${where} is ${kind}; every task must be a JSON object such as {"prompt": "...", "ground_truth": "..."}`,
    );
  }
  return value as DataRow;
}

async function readJsonLines(file: string): Promise<DataRow[]> {
  const rows: DataRow[] = [];
  const lines = (await readFile(file, "utf8")).split("\n");
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new DataLoaderError(
        `${file}:${i + 1} is not valid JSON (${(error as Error).message}); a .jsonl file holds one JSON object per line`,
      );
    }
    rows.push(asRow(value, `${file}:${i + 1}`));
  });
  return rows;
}

async function readJsonArray(file: string): Promise<DataRow[]> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new DataLoaderError(
      `${file} is not valid JSON (${(error as Error).message}); a .json data file holds an array of task objects`,
    );
  }
  if (!Array.isArray(value))
    throw new DataLoaderError(
      `${file} holds a JSON ${typeof value}, not an array; a .json data file holds an array of task objects (use .jsonl for one object per line)`,
    );
  return value.map((item, i) => asRow(item, `${file} item ${i + 1}`));
}

async function readParquet(file: string): Promise<DataRow[]> {
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({ file: await asyncBufferFromFile(file) });
  } catch (error) {
    throw new DataLoaderError(
      `cannot read parquet file ${file}: ${(error as Error).message} (nexrl reads uncompressed and snappy-compressed parquet)`,
      { cause: error },
    );
  }
  // 64-bit integers arrive as BigInt; JSON-compatible values keep rows printable and comparable.
  return rows.map((row, i) => asRow(toJson(row), `${file} row ${i + 1}`));
}

/**
 * The rows of one data file, chosen by extension: `.jsonl` (one JSON object per line, blank lines
 * skipped), `.json` (an array of objects) or `.parquet` (each row an object; 64-bit integers
 * become numbers).
 * @throws {@link DataLoaderError} naming the file (and line) for an unknown extension, a file that
 * cannot be read or parsed, or a record that is not an object.
 */
export async function readDataFile(file: string): Promise<DataRow[]> {
  const ext = extname(file).toLowerCase();
  try {
    switch (ext) {
      case ".jsonl":
        return await readJsonLines(file);
      case ".json":
        return await readJsonArray(file);
      case ".parquet":
        return await readParquet(file);
    }
  } catch (error) {
    if (error instanceof DataLoaderError) throw error;
    throw new DataLoaderError(`cannot read data file ${file}: ${(error as Error).message}`, { cause: error });
  }
  throw new DataLoaderError(
    `data file ${file} has an unsupported extension "${ext}"; use one of ${DATA_FILE_EXTENSIONS.join(", ")}`,
  );
}
