/**
 * `nexrl report --watch`: the report served on 127.0.0.1, the page polling `data.json` and
 * redrawing whenever the run's files change.
 * @module
 */
import { createHash } from "node:crypto";
import { readdir, stat } from "node:fs/promises";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { checkRunFolder } from "../run-folder/read.js";
import { hostAddresses } from "../server/bind.js";
import { BrowserGuard } from "../server/browser-guard.js";
import type { ProtocolError } from "../errors.js";
import { renderReportHtml } from "./html.js";
import { readReportData, type ReportSourceOptions } from "./report.js";

/** Options of {@link serveReport}. */
export interface ServeReportOptions extends ReportSourceOptions {
  /** Interface to bind (default `127.0.0.1`). */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** How often the page asks for new data, in ms (default 2000). */
  intervalMs?: number;
  /** Host names the `Host` header may give besides the bound address (and, on loopback, `localhost`); others get 403. */
  allowedHosts?: readonly string[];
  /** Origins whose pages may read the report's data (CORS; `*` for any); other cross-origin requests get 403. */
  corsOrigins?: readonly string[];
}

/** A running report server. */
export interface ReportServer {
  /** The page's URL. */
  readonly url: string;
  /** Stops serving (idempotent). */
  close(): Promise<void>;
}

/** The files whose size and time mark a change of the report. */
const WATCHED = ["metrics.jsonl", "samples.jsonl", "failures.jsonl", "config.resolved.yaml", "run.json"];

/** A tag of the run folder's state: it changes whenever a watched file or the list of checkpoints does. */
async function folderTag(dir: string): Promise<string> {
  const hash = createHash("sha1");
  for (const name of WATCHED) {
    const info = await stat(join(dir, name)).catch(() => undefined);
    hash.update(`${name}:${info ? `${info.size}:${info.mtimeMs}` : "-"};`);
  }
  for (const sub of ["checkpoints", "sampler_weights"])
    hash.update(`${sub}:${(await readdir(join(dir, sub)).catch(() => [] as string[])).sort().join(",")};`);
  return `"${hash.digest("hex").slice(0, 20)}"`;
}

function send(res: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store", ...headers });
  res.end(body);
}

/**
 * Serves the report of a run folder: `/` is the page (the same as `nexrl report` writes, set to
 * poll), `/data.json` the current data with an `ETag` (a `304` when nothing changed). Other web
 * pages cannot read it: requests naming another host, or sent by a page of another origin
 * (unless `corsOrigins` allows it), get 403.
 * @throws RunError when `runDir` is not a run folder.
 */
export async function serveReport(runDir: string, options: ServeReportOptions = {}): Promise<ReportServer> {
  const dir = await checkRunFolder(runDir, options.cwd);
  const intervalMs = options.intervalMs ?? 2000;
  const host = options.host ?? "127.0.0.1";
  const guard = new BrowserGuard({
    boundHost: host,
    boundAddresses: await hostAddresses(host, () => "give --host an address of this machine"),
    allowedHosts: options.allowedHosts,
    corsOrigins: options.corsOrigins,
    server: "nexrl report --watch",
  });
  const server = createServer((req, res) => {
    void (async () => {
      try {
        if (guard.check(req, res)) return;
      } catch (error) {
        return send(res, (error as ProtocolError).status, "text/plain", `${(error as Error).message}\n`);
      }
      try {
        const path = (req.url ?? "/").split("?")[0]!.replace(/\/+/g, "/");
        if (req.method !== "GET" && req.method !== "HEAD")
          return send(res, 405, "text/plain", "GET only\n", { allow: "GET" });
        if (path === "/" || path === "/index.html") {
          const etag = await folderTag(dir);
          const data = await readReportData(dir, options);
          return send(
            res,
            200,
            "text/html; charset=utf-8",
            await renderReportHtml(data, { watch: { intervalMs, etag } }),
          );
        }
        if (path === "/data.json") {
          const etag = await folderTag(dir);
          if (req.headers["if-none-match"] === etag) {
            res.writeHead(304, { etag, "cache-control": "no-store" });
            return res.end();
          }
          const data = await readReportData(dir, options);
          return send(res, 200, "application/json", JSON.stringify(data), { etag });
        }
        send(res, 404, "text/plain", `no ${path} here; the report is at /\n`);
      } catch (error) {
        send(res, 500, "text/plain", `nexrl report: ${(error as Error).message}\n`);
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { address, port, family } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${family === "IPv6" ? `[${address}]` : address}:${port}/`,
    close: () =>
      (closed ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      })),
  };
}
