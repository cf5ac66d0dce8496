/**
 * `logger.backend: [wandb]` against a server written here from the HTTP API W&B's Python SDK
 * speaks: the GraphQL mutation `upsertBucket` that creates (or updates) a run with its config,
 * and the run's file stream, whose `wandb-history.jsonl` lines are written at the offset each
 * request names (a request sent again replaces its lines), with `wandb-summary.json` and the
 * final `complete` message. A run's history there must be `metrics.jsonl`, each step once, also
 * when the server fails requests at the start and in the middle of the run, and across a resume.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runRecipe } from "../../../src/run/run-recipe.js";
import {
  type Answer,
  type Fault,
  faultyServer,
  filesContaining,
  metricsRows,
  numbersOf,
  type Received,
  capture,
  setUp,
  violations,
} from "./remote-helpers.js";

const API_KEY = "wandb0123456789abcdef0123456789abcdef012345";
const DEFAULT_ENTITY = "ada";

const UPSERT = z.strictObject({
  query: z.string().regex(/^mutation \w+\(.*\) \{\s*upsertBucket\(input: \{/s),
  variables: z.strictObject({
    name: z.string().regex(/^[a-z0-9]{8}$/),
    project: z.string().min(1),
    entity: z.string().nullable(),
    displayName: z.string().min(1),
    groupName: z.string().nullable(),
    tags: z.array(z.string()),
    config: z.string(),
  }),
});
const FILES = z.strictObject({
  files: z
    .partialRecord(
      z.enum(["wandb-history.jsonl", "wandb-summary.json"]),
      z.strictObject({ offset: z.int().min(0), content: z.array(z.string()) }),
    )
    .refine((files) => Object.keys(files).length > 0),
});
const COMPLETE = z.strictObject({ complete: z.literal(true), exitcode: z.int() });

interface WandbRun {
  entity: string;
  project: string;
  displayName: string;
  group: string | null;
  tags: string[];
  config: Record<string, { value: unknown }>;
  upserts: number;
  history: string[];
  summary: Record<string, unknown> | undefined;
  exitcodes: number[];
}

/** A W&B server in memory; `problems` lists requests the API would refuse. */
async function wandbServer(faults?: (index: number, request: Received) => Fault) {
  const runs = new Map<string, WandbRun>();
  const problems: string[] = [];
  const refuse = (problem: string): Answer => (problems.push(problem), { status: 400, body: { error: problem } });
  const handle = ({ method, path, headers, body }: Received): Answer => {
    if (headers.authorization !== `Basic ${Buffer.from(`api:${API_KEY}`).toString("base64")}`)
      return (problems.push(`${path}: no basic auth`), { status: 401, body: { error: "unauthorized" } });
    if (method === "POST" && path === "/graphql") {
      const invalid = violations(UPSERT, body);
      if (invalid) return refuse(`graphql: ${invalid}`);
      const v = (body as z.infer<typeof UPSERT>).variables;
      const entity = v.entity ?? DEFAULT_ENTITY;
      const run = runs.get(v.name) ?? {
        entity,
        project: v.project,
        displayName: v.displayName,
        group: v.groupName,
        tags: v.tags,
        config: {},
        upserts: 0,
        history: [],
        summary: undefined,
        exitcodes: [],
      };
      run.upserts += 1;
      run.config = JSON.parse(v.config) as WandbRun["config"];
      runs.set(v.name, run);
      return {
        status: 200,
        body: {
          data: {
            upsertBucket: {
              bucket: { id: `b-${v.name}`, name: v.name, project: { name: v.project, entity: { name: entity } } },
            },
          },
        },
      };
    }
    const stream = /^\/files\/([^/]+)\/([^/]+)\/([^/]+)\/file_stream$/.exec(path);
    const run = stream && runs.get(decodeURIComponent(stream[3]!));
    if (method !== "POST" || !stream || !run || run.entity !== stream[1] || run.project !== stream[2])
      return refuse(`${method} ${path}: no such run`);
    if ((body as { complete?: unknown }).complete !== undefined) {
      const invalid = violations(COMPLETE, body);
      if (invalid) return refuse(`complete: ${invalid}`);
      run.exitcodes.push((body as z.infer<typeof COMPLETE>).exitcode);
      return { status: 200, body: { exitcode: null, limits: {} } };
    }
    const invalid = violations(FILES, body);
    if (invalid) return refuse(`file_stream: ${invalid}`);
    const { files } = body as z.infer<typeof FILES>;
    const history = files["wandb-history.jsonl"];
    if (history) {
      if (history.offset > run.history.length) return refuse(`history offset ${history.offset} leaves a gap`);
      run.history.splice(history.offset, history.content.length, ...history.content);
    }
    const summary = files["wandb-summary.json"];
    if (summary) run.summary = JSON.parse(summary.content.at(-1)!) as Record<string, unknown>;
    return { status: 200, body: { exitcode: null, limits: {} } };
  };
  const server = await faultyServer(handle, faults);
  return { server, runs, problems };
}

/** The history of `run` by step (a step twice fails the test), without W&B's own `_` keys. */
function byStep(run: WandbRun): Map<number, Record<string, number>> {
  const steps = new Map<number, Record<string, number>>();
  for (const line of run.history) {
    const { _step, _runtime, _timestamp, ...metrics } = JSON.parse(line) as Record<string, number>;
    expect(_runtime).toBeGreaterThanOrEqual(0);
    expect(_timestamp).toBeGreaterThan(1.7e9);
    expect(steps.has(_step!), `step ${_step} twice`).toBe(false);
    steps.set(_step!, metrics);
  }
  return steps;
}

describe("the W&B logger", () => {
  it("creates the run with the recipe as config, streams every step of metrics.jsonl, the summary and the exit code", async () => {
    const { server, runs, problems } = await wandbServer();
    try {
      const { recipe, out } = await setUp(
        "logger: {backend: [console, wandb], wandb: {project: nexrl-tests, run_name: tiny, group: g1, tags: [a, b]}}\n",
      );
      const seen = capture();
      const result = await runRecipe(recipe, {
        outputDir: out,
        env: { ...process.env, WANDB_API_KEY: API_KEY, WANDB_BASE_URL: server.url },
        progress: seen.progress,
        onEvent: seen.onEvent,
      });
      expect(result.steps).toBe(3);
      expect(problems).toEqual([]);
      expect(runs.size).toBe(1);
      const [[runId, run]] = [...runs] as [[string, WandbRun]];
      expect(run).toMatchObject({
        entity: DEFAULT_ENTITY,
        project: "nexrl-tests",
        displayName: "tiny",
        group: "g1",
        tags: ["a", "b"],
        upserts: 1,
        exitcodes: [0],
      });
      // The config is the resolved recipe, each section a { value } entry.
      const resolved = parse(await readFile(join(out, "config.resolved.yaml"), "utf8")) as Record<string, unknown>;
      expect(run.config).toEqual(Object.fromEntries(Object.entries(resolved).map(([k, value]) => [k, { value }])));
      const rows = await metricsRows(out);
      const logged = byStep(run);
      expect([...logged.keys()]).toEqual([1, 2, 3]);
      for (const row of rows) expect(logged.get(row.step!)).toEqual(numbersOf(row));
      expect(Object.keys(logged.get(1)!).length).toBeGreaterThan(10);
      expect(run.summary).toMatchObject({ ...numbersOf(rows.at(-1)!), _step: 3, "nexrl/status": "finished" });
      expect(JSON.parse(await readFile(join(out, "wandb.json"), "utf8"))).toMatchObject({
        run_id: runId,
        entity: DEFAULT_ENTITY,
        project: "nexrl-tests",
        history_lines: 3,
        sent_through: 3,
      });
      expect(seen.warnings).toEqual([]);
      expect(await filesContaining(out, API_KEY)).toEqual([]);
      expect(seen.console.join("")).not.toContain(API_KEY);
    } finally {
      await server.close();
    }
  });

  it("keeps the steps while the server fails, warns once, has each step once, and a resume continues the same run", async () => {
    // 503 for the first 2 requests, cut connections for requests 4 and 5, and the (first)
    // request with step 2's history line handled but its answer lost: sent again, its lines
    // replace those it wrote.
    let lost = false;
    const { server, runs, problems } = await wandbServer((i, request) => {
      if (i < 2) return "503";
      if (i === 4 || i === 5) return "reset";
      const history = (request.body as { files?: Record<string, { content: string[] }> } | undefined)?.files?.[
        "wandb-history.jsonl"
      ];
      if (!lost && history?.content.some((line) => (JSON.parse(line) as { _step: number })._step === 2))
        return ((lost = true), "lost");
      return undefined;
    });
    try {
      const { recipe, out } = await setUp("logger: {backend: [wandb]}\n", ["trainer.save_freq=2"]);
      const env = { ...process.env, WANDB_API_KEY: API_KEY, WANDB_BASE_URL: server.url, WANDB_PROJECT: "p" };
      const first = capture();
      const done = await runRecipe(recipe, { outputDir: out, env, progress: first.progress, onEvent: first.onEvent });
      expect(done.steps).toBe(3);
      expect(server.faulted).toBe(5);
      expect(first.warnings).toHaveLength(1);
      expect(first.warnings[0]).toMatch(
        /^the W&B logger could not send to http:\/\/127\.0\.0\.1:\d+ \(.*503.*\); it keeps/,
      );
      const second = capture();
      const resumed = await runRecipe(recipe.path, {
        outputDir: out,
        env,
        overrides: ["trainer.save_freq=2", "trainer.total_train_steps=4", "resume.mode=auto"],
        progress: second.progress,
        onEvent: second.onEvent,
      });
      expect(resumed.steps).toBe(4);
      expect(second.warnings).toEqual([]);
      expect(problems).toEqual([]);
      expect(runs.size).toBe(1);
      const [run] = [...runs.values()] as [WandbRun];
      expect(run).toMatchObject({ project: "p", upserts: 2, exitcodes: [0, 0] });
      const rows = await metricsRows(out);
      const logged = byStep(run);
      expect([...logged.keys()]).toEqual([1, 2, 3, 4]);
      for (const row of rows) expect(logged.get(row.step!)).toEqual(numbersOf(row));
      expect(run.summary).toMatchObject({ ...numbersOf(rows.at(-1)!), _step: 4 });
      expect(await filesContaining(out, API_KEY)).toEqual([]);
      expect([...first.console, ...second.console].join("")).not.toContain(API_KEY);
    } finally {
      await server.close();
    }
  }, 60_000);

  it("refuses to start without WANDB_API_KEY, before writing anything", async () => {
    const { recipe, out } = await setUp("logger: {backend: [wandb]}\n");
    const { WANDB_API_KEY: _, ...env } = process.env;
    await expect(runRecipe(recipe, { outputDir: out, env })).rejects.toThrow(
      /logger\.backend\[0\]: the wandb logger needs an API key: set the environment variable WANDB_API_KEY/,
    );
    await expect(readFile(join(out, "config.resolved.yaml"))).rejects.toThrow(/ENOENT/);
  });
});
