/**
 * Append-only JSON Lines files keyed by training step, rewritten past a checkpoint on resume.
 * @module
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { storageError } from "../errors.js";

/** A row with its step. */
export interface StepRow {
  /** The training step the row belongs to. */
  step: number;
  [key: string]: unknown;
}

/**
 * A `.jsonl` file of rows keyed by `step`. Opening it for a resumed run keeps the rows up to the
 * checkpoint's step and drops the rest, so the rows a resumed run writes replace, rather than
 * repeat, those written after the checkpoint by the interrupted run. A line it cannot keep (cut
 * short, not a JSON object, without a step) is dropped with a warning naming the file and line.
 */
export class JsonlLog<Row extends StepRow = StepRow> {
  private constructor(
    /** The file. */
    readonly path: string,
    private readonly kept: Row[],
  ) {}

  /**
   * Opens `path`: empty for a fresh run (`keepThroughStep` undefined), else keeping the rows whose
   * step is at most `keepThroughStep`; `warn` hears of each line it drops for being unreadable.
   */
  static async open<Row extends StepRow>(
    path: string,
    keepThroughStep?: number,
    warn: (message: string) => void = () => {},
  ): Promise<JsonlLog<Row>> {
    let rows: Row[] = [];
    if (keepThroughStep !== undefined) {
      const text = await readFile(path, "utf8").catch(() => "");
      rows = text.split("\n").flatMap((line, index) => {
        if (line.trim() === "") return [];
        const row = parseRow(line);
        if (row && typeof row.step === "number") return row.step <= keepThroughStep ? [row as Row] : [];
        warn(droppedLineMessage(path, index + 1, line, row, keepThroughStep));
        return [];
      });
    }
    try {
      await writeFile(path, rows.map((row) => `${JSON.stringify(row)}\n`).join(""));
    } catch (error) {
      throw storageError(path, error);
    }
    return new JsonlLog(path, rows);
  }

  /** Every row in the file, in order. */
  get rows(): readonly Row[] {
    return this.kept;
  }

  /** Appends a row. */
  async append(row: Row): Promise<void> {
    this.kept.push(row);
    try {
      await appendFile(this.path, `${JSON.stringify(row)}\n`);
    } catch (error) {
      throw storageError(this.path, error);
    }
  }
}

/** The JSON object on `line`; `undefined` when it does not parse, `null` when it is not an object. */
function parseRow(line: string): Partial<StepRow> | null | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Partial<StepRow>) : null;
}

/**
 * What a resume says of line `lineNumber` of `path`, which holds no row it can keep: cut short (a
 * process stopped or the disk filled mid-write), not a JSON object, or without a step.
 */
function droppedLineMessage(
  path: string,
  lineNumber: number,
  line: string,
  row: Partial<StepRow> | null | undefined,
  keepThroughStep: number,
): string {
  const where = `${path} line ${lineNumber}`;
  if (row === null) return `${where} is not a JSON object (${line.slice(0, 40)}): the resume drops it`;
  if (row !== undefined) return `${where} has no step: the resume drops it`;
  // A cut line still names its step when the cut came after it (rows start with it).
  const step = /^\{"step":(\d+)[,}]/.exec(line)?.[1];
  const fate =
    step === undefined
      ? "its step cannot be read"
      : Number(step) > keepThroughStep
        ? `step ${step} is past the checkpoint (step ${keepThroughStep}) and will be logged again`
        : `step ${step}'s row stays missing, as the resumed run starts after it (the checkpoint is of step ${keepThroughStep})`;
  return `${where} is cut short (the process stopped or the disk filled while writing it): the resume drops it; ${fate}`;
}
