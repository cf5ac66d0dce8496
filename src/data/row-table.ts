/**
 * {@link RowTable}: the rows of data files held compactly, as their UTF-8 JSON text in a few large
 * buffers, and parsed when a row is handed out: a large data file then takes about its own size
 * in memory, less than its rows as parsed objects (figures in bench/README.md).
 * @module
 */
import type { DataRow } from "../contracts/task.js";
import { InputError } from "../errors.js";

/** Bytes of one text segment; a longer row gets a segment of its own. */
const SEGMENT_BYTES = 8 * 1024 * 1024;

/** How a file's rows are numbered in messages. */
type Numbering = "line" | "item" | "row";

/** A file's share of the table. */
interface FileRange {
  readonly file: string;
  readonly numbering: Numbering;
  /** Index of its first row in the table. */
  readonly firstRow: number;
}

/** Where a row came from, for messages. */
export interface RowOrigin {
  /** The data file. */
  readonly file: string;
  /** The row's index among the rows of its file (blank lines not counted). */
  readonly index: number;
  /** How messages name it, counting from 1: `file:LINE` for JSON Lines, `file item N` (JSON), `file row N` (Parquet). */
  readonly label: string;
}

/** A `Uint32Array` that grows by doubling; {@link GrowingUint32.trimmed} gives the used part. */
class GrowingUint32 {
  private data = new Uint32Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.data.length) {
      const bigger = new Uint32Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = value;
  }

  trimmed(): Uint32Array {
    return this.data.slice(0, this.length);
  }
}

/**
 * Rows read from data files, each kept as its JSON text (a JSON Lines row as the bytes of its
 * line) and parsed by {@link RowTable.row} on every call. Build one with {@link readRowTable}.
 */
export class RowTable {
  /** Index of the first row of each file. */
  private readonly fileFirstRows: readonly number[];

  /** @internal */
  constructor(
    private readonly segments: readonly Buffer[],
    /** Bytes used in each segment. */
    private readonly used: readonly number[],
    /** Index of the first row of each segment. */
    private readonly segmentFirstRow: readonly number[],
    /** Byte offset of each row in its segment. */
    private readonly starts: Uint32Array,
    /** JSON Lines: the line of each row (1-based); other files: unused. */
    private readonly lines: Uint32Array,
    private readonly files: readonly FileRange[],
  ) {
    this.fileFirstRows = files.map((f) => f.firstRow);
  }

  /** Number of rows. */
  get length(): number {
    return this.starts.length;
  }

  /** The JSON text of row `index`. */
  text(index: number): string {
    const s = lastAtOrBelow(this.segmentFirstRow, index);
    const segmentEnd = s + 1 < this.segmentFirstRow.length ? this.segmentFirstRow[s + 1]! : this.length;
    const end = index + 1 < segmentEnd ? this.starts[index + 1]! : this.used[s]!;
    return this.segments[s]!.toString("utf8", this.starts[index]!, end);
  }

  /**
   * Row `index`, parsed afresh (a new object on each call).
   * @throws {@link "nexrl/errors".InputError | InputError} naming the file and line when the text is not JSON or not an object.
   */
  row(index: number): DataRow {
    const text = this.text(index);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      const { label } = this.origin(index);
      throw new InputError(
        `${label} is not valid JSON (${(error as Error).message}); a .jsonl file holds one JSON object per line`,
      );
    }
    if (isRow(value)) return value;
    // The label is built only for a bad row: this runs for every row loaded and handed out.
    throw notAnObject(value, this.origin(index).label);
  }

  /** The file and position row `index` came from. */
  origin(index: number): RowOrigin {
    const range = this.files[lastAtOrBelow(this.fileFirstRows, index)]!;
    const within = index - range.firstRow;
    const label =
      range.numbering === "line"
        ? `${range.file}:${this.lines[index]}`
        : `${range.file} ${range.numbering} ${within + 1}`;
    return { file: range.file, index: within, label };
  }
}

/** The position of the last entry of the ascending `sorted` that is ≤ `value`. */
function lastAtOrBelow(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (sorted[mid]! <= value) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

function isRow(value: unknown): value is DataRow {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The error for a record that is not a JSON object, found at `where`. */
function notAnObject(value: unknown, where: string): InputError {
  const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
  return new InputError(
    `${where} is ${kind}; every task must be a JSON object such as {"prompt": "...", "ground_truth": "..."}`,
  );
}

/** Fills a {@link RowTable} file by file, row by row. */
export class RowTableBuilder {
  private readonly segments: Buffer[] = [];
  private readonly used: number[] = [];
  private readonly segmentFirstRow: number[] = [];
  private readonly starts = new GrowingUint32();
  private readonly lines = new GrowingUint32();
  private readonly files: FileRange[] = [];
  private segment: Buffer | undefined;
  private at = 0;

  /** Starts the rows of `file`, numbered as `numbering` says in messages. */
  beginFile(file: string, numbering: Numbering): void {
    this.files.push({ file, numbering, firstRow: this.starts.length });
  }

  /** Adds a row from the bytes `bytes[start, end)` (a JSON Lines line), found on line `line`. */
  addBytes(bytes: Uint8Array, start: number, end: number, line: number): void {
    const target = this.room(end - start);
    target.set(bytes.subarray(start, end), this.at);
    this.at += end - start;
    this.lines.push(line);
  }

  /** Adds a row from its JSON text. */
  addText(text: string): void {
    const size = Buffer.byteLength(text);
    const target = this.room(size);
    this.at += target.write(text, this.at, size, "utf8");
    this.lines.push(0);
  }

  /** The table; the builder is not to be used after. */
  finish(): RowTable {
    this.closeSegment();
    return new RowTable(
      this.segments,
      this.used,
      this.segmentFirstRow,
      this.starts.trimmed(),
      this.lines.trimmed(),
      this.files,
    );
  }

  /** The segment the next row of `size` bytes goes into, with the row's start recorded. */
  private room(size: number): Buffer {
    if (this.segment === undefined || this.at + size > this.segment.length) {
      this.closeSegment();
      this.segment = Buffer.allocUnsafeSlow(Math.max(SEGMENT_BYTES, size));
      this.at = 0;
      this.segmentFirstRow.push(this.starts.length);
    }
    this.starts.push(this.at);
    return this.segment;
  }

  /** Keeps the current segment, copied to its used size when that saves much. */
  private closeSegment(): void {
    if (this.segment === undefined) return;
    const kept = this.at < this.segment.length / 2 ? Buffer.from(this.segment.subarray(0, this.at)) : this.segment;
    this.segments.push(kept);
    this.used.push(this.at);
    this.segment = undefined;
  }
}
