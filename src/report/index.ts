/**
 * The run report: a run folder's metrics, rollouts, configuration and checkpoints as one
 * self-contained HTML page (`nexrl report`), or served live while the run goes on (`--watch`).
 * @module
 */
export type { ReportChart, ReportCheckpoint, ReportData, ReportFamily, ReportSummary, SummaryItem } from "./data.js";
export { renderReportHtml, type RenderReportOptions, type WatchPageOptions } from "./html.js";
export { readReportData, writeReport, type ReportSourceOptions, type WriteReportOptions } from "./report.js";
export { serveReport, type ReportServer, type ServeReportOptions } from "./watch.js";
