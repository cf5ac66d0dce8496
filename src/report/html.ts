/**
 * The report page: one self-contained HTML file (no network, works from `file://`) with the
 * uPlot chart library, its stylesheet and license, the page's own script and style, and the
 * report data inlined.
 * @module
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ReportData } from "./data.js";

/** How a served page keeps itself current (`nexrl report --watch`). */
export interface WatchPageOptions {
  /** Milliseconds between two requests of `data.json`. */
  intervalMs: number;
  /** The `ETag` of the embedded data: the page redraws when `data.json` answers with another. */
  etag: string;
}

/** Options of {@link renderReportHtml}. */
export interface RenderReportOptions {
  /** For `nexrl report --watch`: the page polls `data.json` and redraws on change. */
  watch?: WatchPageOptions;
}

/** The files the page inlines, read once per process. */
interface PageAssets {
  uplotJs: string;
  uplotCss: string;
  uplotLicense: string;
  clientJs: string;
  styleCss: string;
}

let assets: Promise<PageAssets> | undefined;

/** The page's own script and style sit in `assets/report/` of the package (beside `src/` and `dist/`). */
const OWN_ASSETS = new URL("../../assets/report/", import.meta.url);

function loadAssets(): Promise<PageAssets> {
  assets ??= (async () => {
    const uplotDir = dirname(createRequire(import.meta.url).resolve("uplot/package.json"));
    const read = (path: string | URL) => readFile(path, "utf8");
    const [uplotJs, uplotCss, uplotLicense, clientJs, styleCss] = await Promise.all([
      read(join(uplotDir, "dist", "uPlot.iife.min.js")),
      read(join(uplotDir, "dist", "uPlot.min.css")),
      read(join(uplotDir, "LICENSE")),
      read(new URL("client.js", OWN_ASSETS)),
      read(new URL("style.css", OWN_ASSETS)),
    ]);
    return { uplotJs, uplotCss, uplotLicense, clientJs, styleCss };
  })();
  return assets;
}

/** JSON that is safe inside a `<script>` element: no `<`, and no line separators that old parsers trip on. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** Text that is safe inside an HTML element or attribute. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** Script text that cannot end its `<script>` element early. */
const inlineScript = (code: string): string => code.replace(/<\/(script)/gi, "<\\/$1");

/** The report page of `data`. */
export async function renderReportHtml(data: ReportData, options: RenderReportOptions = {}): Promise<string> {
  const a = await loadAssets();
  const settings = { watch: options.watch ?? null };
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nexrl report">
<link rel="icon" href="data:,">
<title>${escapeHtml(data.title)} — nexrl run report</title>
<style>${a.uplotCss}</style>
<style>${a.styleCss}</style>
</head>
<body>
<noscript>This report draws its charts and rollouts with JavaScript; enable it to see them.</noscript>
<div id="app"></div>
<script id="report-data" type="application/json">${scriptJson(data)}</script>
<script id="report-settings" type="application/json">${scriptJson(settings)}</script>
<!-- uPlot, MIT license:
${escapeHtml(a.uplotLicense).replace(/--/g, "- -")}
-->
<script>${inlineScript(a.uplotJs)}</script>
<script>${inlineScript(a.clientJs)}</script>
</body>
</html>
`;
}
