/**
 * Append-only JSON Lines files keyed by training step, rewritten past a checkpoint on resume.
 * @module
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";

/** A row with its step. */
export interface StepRow {
  /** The training step the row belongs to. */
  step: number;
  [key: string]: unknown;
}

/**
 * A `.jsonl` file of rows keyed by `step`. Opening it for a resumed run keeps the rows up to the
 * checkpoint's step and drops the rest, so the rows a resumed run writes replace, rather than
 * repeat, those written after the checkpoint by the interrupted run.
 */
export class JsonlLog<Row extends StepRow = StepRow> {
  private constructor(
    /** The file. */
    readonly path: string,
    private readonly kept: Row[],
  ) {}

  /**
   * Opens `path`: empty for a fresh run (`keepThroughStep` undefined), else keeping the rows whose
   * step is at most `keepThroughStep`.
   */
  static async open<Row extends StepRow>(path: string, keepThroughStep?: number): Promise<JsonlLog<Row>> {
    let rows: Row[] = [];
    if (keepThroughStep !== undefined) {
      const text = await readFile(path, "utf8").catch(() => "");
      // A process killed mid-write can leave a partial last line: it is past the checkpoint anyway.
      rows = text
        .split("\n")
        .filter((line) => line.trim() !== "")
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as Row];
          } catch {
            return [];
          }
        })
        .filter((row) => typeof row.step === "number" && row.step <= keepThroughStep);
    }
    await writeFile(path, rows.map((row) => `${JSON.stringify(row)}\n`).join(""));
    return new JsonlLog(path, rows);
  }

  /** Every row in the file, in order. */
  get rows(): readonly Row[] {
    return this.kept;
  }

  /** Appends a row. */
  async append(row: Row): Promise<void> {
    this.kept.push(row);
    await appendFile(this.path, `${JSON.stringify(row)}\n`);
  }
}
