/**
 * The contract between `bench/run.ts` and a suite module, and the rows a suite yields.
 *
 * A suite is a file `bench/suites/<name>.ts` that exports `suite`. Every row compares a number
 * measured in this run either with a baseline measured side by side in the same run (so machine
 * noise hits both) or, when no baseline makes sense, with its target alone.
 */

/** One row of a suite's result file (`bench/results/<suite>.json`). Keys are the shared file format. */
export interface Row {
  /** Stable identifier, e.g. `train_step_d64`. */
  name: string;
  /** Our measured value. */
  value: number;
  /** Unit of `value` (and of `compared_with` when it is a number). */
  unit: string;
  /**
   * The baseline's value in the same unit, measured in the same run; `"target"` when the row is
   * judged against its target alone; `"none"` for a row that only reports a measurement.
   */
  compared_with: number | "target" | "none";
  /** `value / compared_with`, or `value / target bound` for rows compared with their target; null for a report-only row. */
  ratio: number | null;
  /** Readable target, e.g. `≤ 1.0` (on the ratio) or `≤ 150 MB` (on the value); `—` for a report-only row. */
  target: string;
  /** Whether the target is met; null for a report-only row (not counted in `N of M rows met`). */
  met: boolean | null;
}

/** What a suite may use from the harness. */
export interface SuiteContext {
  /** Progress line on stderr, so stdout stays the result table. */
  log(message: string): void;
  /** Records how the suite measured (shapes, repetitions, baseline versions) in the result file's `setup`. */
  setup(key: string, value: unknown): void;
  /** A line printed under the suite's table, e.g. why some rows were skipped (record it in `setup` too). */
  note(message: string): void;
}

/** A benchmark suite: yields its rows one by one as they are measured. */
export interface Suite {
  /** One line shown before the suite runs. */
  description: string;
  run(ctx: SuiteContext): AsyncIterable<Row>;
  /**
   * The result file's name (without `.json`) when it is not the suite's own, e.g. for a run of
   * part of the suite, so that it does not replace the whole suite's results.
   */
  resultName?(): string;
}

/** A bound on a ratio or value: `<=` for costs (time, memory), `>=` for throughputs. */
export interface Target {
  op: "<=" | ">=";
  bound: number;
}

function describeTarget(target: Target, unit?: string): string {
  const bound = Number.isInteger(target.bound) && unit === undefined ? target.bound.toFixed(1) : String(target.bound);
  return `${target.op === "<=" ? "≤" : "≥"} ${bound}${unit === undefined ? "" : ` ${unit}`}`;
}

function meets(x: number, target: Target): boolean {
  return target.op === "<=" ? x <= target.bound : x >= target.bound;
}

/** A row whose target is on `value / baseline`. */
export function comparedRow(name: string, unit: string, value: number, baseline: number, target: Target): Row {
  const ratio = value / baseline;
  return {
    name,
    value,
    unit,
    compared_with: baseline,
    ratio,
    target: describeTarget(target),
    met: meets(ratio, target),
  };
}

/** A row that reports a measurement with neither baseline nor target (e.g. a model size no baseline runs). */
export function reportRow(name: string, unit: string, value: number): Row {
  return { name, value, unit, compared_with: "none", ratio: null, target: "—", met: null };
}

/** A row with no baseline: the target is on the value itself, and `ratio` is `value / bound`. */
export function targetRow(name: string, unit: string, value: number, target: Target): Row {
  return {
    name,
    value,
    unit,
    compared_with: "target",
    ratio: value / target.bound,
    target: describeTarget(target, unit),
    met: meets(value, target),
  };
}
