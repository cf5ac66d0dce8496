/**
 * What the tests of the remote loggers share: a loopback HTTP server that can fail requests on
 * purpose, the run folder's files and metrics rows, and the run's console.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { RunEvent } from "../../../src/outputs/events.js";
import { additionRows, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../../support/pipeline.js";

/**
 * What happens to the request of a given index (0 for the first): answered, refused with 503,
 * its connection cut before it is handled (`reset`), or handled and then cut (`lost`: the
 * answer never arrives).
 */
export type Fault = "503" | "reset" | "lost" | undefined;

/** A request as the server received it. */
export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
}

/** An answer: a status and a JSON body. */
export type Answer = { status: number; body: unknown };

/**
 * Starts an HTTP server on 127.0.0.1 that answers with `handle` (`faults(i, request)` first
 * decides what happens to the i-th request); `faulted` counts the requests it faulted.
 */
export async function faultyServer(
  handle: (request: Received) => Answer,
  faults: (index: number, request: Received) => Fault = () => undefined,
): Promise<{ url: string; faulted: number; close(): Promise<void> }> {
  const state = { faulted: 0 };
  let index = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const received: Received = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: text === "" ? undefined : (JSON.parse(text) as unknown),
      };
      const fault = faults(index++, received);
      if (fault !== undefined) state.faulted += 1;
      if (fault === "reset") return void req.socket.destroy();
      const answer: Answer =
        fault === "503"
          ? { status: 503, body: { error_code: "TEMPORARILY_UNAVAILABLE", message: "down for a moment" } }
          : handle(received);
      if (fault === "lost") return void req.socket.destroy();
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get faulted() {
      return state.faulted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Parses `value` with `schema`, or returns the problems in words (a request the documented API would refuse). */
export function violations(schema: z.ZodType, value: unknown): string | undefined {
  const parsed = schema.safeParse(value);
  return parsed.success ? undefined : z.prettifyError(parsed.error);
}

/** Paths of every file under `dir`. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/** The files under `dir` whose bytes contain `secret`. */
export async function filesContaining(dir: string, secret: string): Promise<string[]> {
  const found: string[] = [];
  for (const path of await filesUnder(dir)) if ((await readFile(path)).includes(secret)) found.push(path);
  return found;
}

/** The rows of the run folder's `metrics.jsonl`. */
export async function metricsRows(dir: string): Promise<Array<Record<string, number | null>>> {
  return (await readFile(join(dir, "metrics.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, number | null>);
}

/** The finite numbers of a metrics row but its step, by name. */
export function numbersOf(row: Record<string, number | null>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(row).filter(
      (entry): entry is [string, number] =>
        entry[0] !== "step" && typeof entry[1] === "number" && Number.isFinite(entry[1]),
    ),
  );
}

/** The leaves of a parsed recipe as `section.key` → text (strings as they are, anything else as JSON). */
export function flatten(value: unknown, path = ""): Record<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value))
    return Object.assign(
      {},
      ...Object.entries(value).map(([key, child]) => flatten(child, path ? `${path}.${key}` : key)),
    ) as Record<string, string>;
  return { [path]: typeof value === "string" ? value : JSON.stringify(value) };
}

/** A GRPO recipe of 3 steps on the addition rows with `extra` YAML appended, and where its run goes. */
export async function setUp(extra: string, overrides: string[] = [], worker?: { worker: string; className: string }) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(8));
  const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 3, extra, ...worker }), overrides);
  return { recipe, out: join(dir, "out") };
}

/** The console text and the warnings of a run. */
export function capture() {
  const console: string[] = [];
  const warnings: string[] = [];
  return {
    console,
    warnings,
    progress: { write: (text: string) => void console.push(text) },
    onEvent: (event: RunEvent) => {
      if (event.type === "warning") warnings.push(event.message);
    },
  };
}
