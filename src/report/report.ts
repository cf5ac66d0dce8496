/**
 * `nexrl report`: the report of a run folder as one self-contained HTML file.
 * @module
 */
import { rename, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { storageError } from "../errors.js";
import { readRunFolder } from "../run-folder/read.js";
import { readRunWeights } from "../run-folder/weights.js";
import { buildReportData, type ReportData } from "./data.js";
import { renderReportHtml } from "./html.js";

/** Where a run folder is found and how its configuration is redacted. */
export interface ReportSourceOptions {
  /** Folder a relative run folder is found from (default: the current directory). */
  cwd?: string;
  /** Environment whose secret values are redacted from the configuration (default: `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Reads a run folder into the data of its report.
 * @throws RunError when `runDir` is not a run folder.
 */
export async function readReportData(runDir: string, options: ReportSourceOptions = {}): Promise<ReportData> {
  const run = await readRunFolder(runDir, options);
  return buildReportData(run, await readRunWeights(run));
}

/** Options of {@link writeReport}. */
export interface WriteReportOptions extends ReportSourceOptions {
  /** The HTML file to write (default: `report.html` in the run folder), relative to `cwd`. */
  output?: string;
}

/**
 * Writes the report of a run folder: one HTML file with the summary, a chart per metric grouped
 * by family (validation overlaid), the rollout browser with per-token colours, the checkpoints
 * and the resolved configuration (secrets redacted). It needs no network and opens from `file://`.
 * Returns the file's absolute path.
 *
 * @example
 * ```ts
 * const file = await writeReport("runs/pig", { output: "pig.html" });
 * ```
 * @throws RunError when `runDir` is not a run folder.
 */
export async function writeReport(runDir: string, options: WriteReportOptions = {}): Promise<string> {
  const data = await readReportData(runDir, options);
  const file = options.output
    ? resolve(options.cwd ?? process.cwd(), options.output)
    : join(data.runDir, "report.html");
  const html = await renderReportHtml(data);
  try {
    await writeFile(`${file}.tmp`, html);
    await rename(`${file}.tmp`, file);
  } catch (error) {
    await rm(`${file}.tmp`, { force: true });
    throw storageError(file, error);
  }
  return file;
}
