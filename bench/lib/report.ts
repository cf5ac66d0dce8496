/** Result files and the printed table. */
import { mkdir, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import type { MachineInfo } from "./machine.js";
import type { Row } from "./suite.js";

/** The shared result-file format, one file per suite. */
export interface SuiteResult {
  suite: string;
  /** ISO time the suite started. */
  date: string;
  machine: MachineInfo;
  /** How the suite measured: shapes, repetitions, baseline versions. */
  setup: Record<string, unknown>;
  rows: Row[];
}

/** Writes `<dir>/<name>.json` (`name`: the suite by default) through a temporary file, so an interrupted run never leaves half a file. */
export async function writeResult(dir: string, result: SuiteResult, name = result.suite): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.json`);
  await writeFile(`${file}.tmp`, `${JSON.stringify(result, null, 2)}\n`);
  await rename(`${file}.tmp`, file);
  return file;
}

/** Four significant digits, without exponent notation for the magnitudes benchmarks produce. */
export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const digits = Math.max(0, 3 - Math.floor(Math.log10(Math.abs(x) || 1)));
  return x.toFixed(Math.min(digits, 4));
}

/** The rows as an aligned text table (numbers right-aligned), with a header line. */
export function formatTable(rows: readonly Row[]): string {
  const header = ["name", "value", "unit", "compared_with", "ratio", "target", "met"];
  const cells = rows.map((r) => [
    r.name,
    formatNumber(r.value),
    r.unit,
    typeof r.compared_with === "number" ? formatNumber(r.compared_with) : r.compared_with,
    r.ratio === null ? "—" : r.ratio.toFixed(3),
    r.target,
    r.met === null ? "—" : r.met ? "yes" : "NO",
  ]);
  const numeric = [false, true, false, true, true, false, false];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c
      .map((s, i) => (numeric[i] ? s.padStart(widths[i]!) : s.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}
