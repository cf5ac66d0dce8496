/**
 * `logger.backend: [mlflow]` against a tracking server written here from MLflow's REST API
 * reference (2.0): it checks each request's shape and the `runs/log-batch` limits, keeps params
 * immutable as MLflow does, and records everything. A run's metrics there must be those of
 * `metrics.jsonl`, each step once, also when the server fails requests (503s, cut connections)
 * at the start and in the middle of the run, and across a resume (the same MLflow run).
 */
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runRecipe } from "../../../src/run/run-recipe.js";
import { fixture } from "../../support/pipeline.js";
import {
  type Answer,
  type Fault,
  faultyServer,
  filesContaining,
  flatten,
  metricsRows,
  numbersOf,
  type Received,
  capture,
  setUp,
  violations,
} from "./remote-helpers.js";

const TOKEN = "mlflow-token-5f0c9e2a7d41";

const keyValue = (maxValue: number) =>
  z.strictObject({ key: z.string().min(1).max(250), value: z.string().max(maxValue) });
const REQUESTS: Record<string, z.ZodType> = {
  "experiments/create": z.strictObject({ name: z.string().min(1), artifact_location: z.string().optional() }),
  "runs/create": z.strictObject({
    experiment_id: z.string(),
    run_name: z.string().optional(),
    start_time: z.int().positive(),
    tags: z.array(keyValue(5000)).optional(),
  }),
  "runs/log-batch": z
    .strictObject({
      run_id: z.string(),
      metrics: z
        .array(
          z.strictObject({
            key: z.string().min(1).max(250),
            value: z.number(),
            timestamp: z.int().positive(),
            step: z.int().min(0),
          }),
        )
        .max(1000)
        .optional(),
      params: z.array(keyValue(6000)).max(100).optional(),
      tags: z.array(keyValue(5000)).max(100).optional(),
    })
    .refine(
      (b) => (b.metrics?.length ?? 0) + (b.params?.length ?? 0) + (b.tags?.length ?? 0) <= 1000,
      "at most 1000 items per request",
    ),
  "runs/update": z.strictObject({
    run_id: z.string(),
    status: z.enum(["RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"]).optional(),
    end_time: z.int().positive().optional(),
  }),
};

interface Run {
  experimentId: string;
  name: string | undefined;
  startTime: number;
  tags: Map<string, string>;
  params: Map<string, string>;
  metrics: Array<{ key: string; value: number; timestamp: number; step: number }>;
  statuses: string[];
  endTime: number | undefined;
}

const error = (status: number, code: string, message: string): Answer => ({
  status,
  body: { error_code: code, message },
});

/** An MLflow tracking server in memory; `problems` lists requests the documented API would refuse. */
async function mlflowServer(faults?: (index: number, request: Received) => Fault) {
  const experiments = new Map<string, string>();
  const runs = new Map<string, Run>();
  const problems: string[] = [];
  const refuse = (problem: string, answer: Answer): Answer => (problems.push(problem), answer);
  const handle = ({ method, path, headers, body }: Received): Answer => {
    if (headers.authorization !== `Bearer ${TOKEN}`)
      return refuse(`${path}: no bearer token`, error(401, "UNAUTHENTICATED", "no token"));
    const url = new URL(path, "http://x");
    const endpoint = url.pathname.replace(/^\/api\/2\.0\/mlflow\//, "");
    if (endpoint === "experiments/get-by-name" && method === "GET") {
      const name = url.searchParams.get("experiment_name") ?? "";
      const id = experiments.get(name);
      return id === undefined
        ? error(404, "RESOURCE_DOES_NOT_EXIST", `Could not find experiment with name '${name}'`)
        : { status: 200, body: { experiment: { experiment_id: id, name, lifecycle_stage: "active" } } };
    }
    const schema = REQUESTS[endpoint];
    if (!schema || method !== "POST") return refuse(`${method} ${path}`, error(404, "ENDPOINT_NOT_FOUND", path));
    const invalid = violations(schema, body);
    if (invalid) return refuse(`${endpoint}: ${invalid}`, error(400, "INVALID_PARAMETER_VALUE", invalid));
    const request = body as Record<string, unknown>;
    if (endpoint === "experiments/create") {
      const name = request.name as string;
      if (experiments.has(name)) return error(400, "RESOURCE_ALREADY_EXISTS", `Experiment '${name}' already exists.`);
      experiments.set(name, String(100 + experiments.size));
      return { status: 200, body: { experiment_id: experiments.get(name) } };
    }
    if (endpoint === "runs/create") {
      const id = `run${runs.size}abcdef`;
      const tags = (request.tags ?? []) as Array<{ key: string; value: string }>;
      runs.set(id, {
        experimentId: request.experiment_id as string,
        name: request.run_name as string | undefined,
        startTime: request.start_time as number,
        tags: new Map(tags.map((t) => [t.key, t.value])),
        params: new Map(),
        metrics: [],
        statuses: ["RUNNING"],
        endTime: undefined,
      });
      return { status: 200, body: { run: { info: { run_id: id, run_uuid: id, status: "RUNNING" }, data: {} } } };
    }
    const run = runs.get(request.run_id as string);
    if (!run) return refuse(`unknown run ${String(request.run_id)}`, error(404, "RESOURCE_DOES_NOT_EXIST", "no run"));
    if (endpoint === "runs/update") {
      if (request.status !== undefined) run.statuses.push(request.status as string);
      if (request.end_time !== undefined) run.endTime = request.end_time as number;
      return { status: 200, body: { run_info: { run_id: request.run_id, status: run.statuses.at(-1) } } };
    }
    const batch = request as {
      metrics?: Run["metrics"];
      params?: Array<{ key: string; value: string }>;
      tags?: Array<{ key: string; value: string }>;
    };
    for (const p of batch.params ?? [])
      if (run.params.has(p.key) && run.params.get(p.key) !== p.value)
        return refuse(`param ${p.key} changed`, error(400, "INVALID_PARAMETER_VALUE", `Changing param ${p.key}`));
    for (const p of batch.params ?? []) run.params.set(p.key, p.value);
    for (const t of batch.tags ?? []) run.tags.set(t.key, t.value);
    run.metrics.push(...(batch.metrics ?? []));
    return { status: 200, body: {} };
  };
  const server = await faultyServer(handle, faults);
  return { server, experiments, runs, problems };
}

/** The recorded metrics of `run` by step (a key logged twice at a step fails the test). */
function byStep(run: Run): Map<number, Record<string, number>> {
  const steps = new Map<number, Record<string, number>>();
  for (const m of run.metrics) {
    const row = steps.get(m.step) ?? {};
    expect(row, `step ${m.step} has ${m.key} twice`).not.toHaveProperty([m.key]);
    row[m.key] = m.value;
    steps.set(m.step, row);
  }
  return steps;
}

describe("the MLflow logger", () => {
  it("logs the recipe as params, every step's metrics as in metrics.jsonl, tags and the final status", async () => {
    const { server, experiments, runs, problems } = await mlflowServer();
    try {
      // 30 more tags make the recipe more params than one request takes; `note` is longer than a param or tag value may be.
      const tags = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`t${i}`, `v${i}`]));
      const note = "n".repeat(7000);
      const { recipe, out } = await setUp(
        `logger: {backend: [console, mlflow], mlflow: {experiment_name: nexrl-tests, run_name: tiny, tags: ${JSON.stringify({ team: "rl", note, ...tags })}}}\n`,
      );
      const seen = capture();
      const result = await runRecipe(recipe, {
        outputDir: out,
        env: { ...process.env, MLFLOW_TRACKING_URI: server.url, MLFLOW_TRACKING_TOKEN: TOKEN },
        progress: seen.progress,
        onEvent: seen.onEvent,
      });
      expect(result.steps).toBe(3);
      expect(problems).toEqual([]);
      expect([...experiments.keys()]).toEqual(["nexrl-tests"]);
      expect(runs.size).toBe(1);
      const [[runId, run]] = [...runs] as [[string, Run]];
      expect(run.experimentId).toBe(experiments.get("nexrl-tests"));
      expect(run.name).toBe("tiny");
      const rows = await metricsRows(out);
      expect(rows.map((r) => r.step)).toEqual([1, 2, 3]);
      const logged = byStep(run);
      expect([...logged.keys()]).toEqual([1, 2, 3]);
      for (const row of rows) expect(logged.get(row.step!)).toEqual(numbersOf(row));
      expect(Object.keys(logged.get(1)!).length).toBeGreaterThan(10);
      // The params are the resolved recipe's leaves, as config.resolved.yaml has them.
      const resolved = flatten(parse(await readFile(join(out, "config.resolved.yaml"), "utf8")));
      expect(Object.fromEntries(run.params)).toEqual({ ...resolved, "logger.mlflow.tags.note": note.slice(0, 6000) });
      // More than one log-batch request of at most 100 (the server refuses more).
      expect(run.params.size).toBeGreaterThan(100);
      expect(run.tags.get("note")).toBe(note.slice(0, 5000));
      expect(run.tags.get("t29")).toBe("v29");
      expect(run.params.get("trainer.total_train_steps")).toBe("3");
      expect(run.tags.get("team")).toBe("rl");
      expect(run.tags.get("nexrl.run_dir")).toBe(out);
      expect(run.tags.get("nexrl.status")).toBe("finished");
      expect(JSON.parse(run.tags.get("nexrl.summary")!)).toMatchObject({ lastStep: 3, totalSteps: 3 });
      expect(run.statuses).toEqual(["RUNNING", "FINISHED"]);
      expect(run.endTime).toBeGreaterThanOrEqual(run.startTime);
      expect(JSON.parse(await readFile(join(out, "mlflow.json"), "utf8"))).toMatchObject({
        run_id: runId,
        sent_through: 3,
        params_logged: true,
      });
      expect(seen.warnings).toEqual([]);
      expect(await filesContaining(out, TOKEN)).toEqual([]);
      expect(seen.console.join("")).not.toContain(TOKEN);
    } finally {
      await server.close();
    }
  });

  it("keeps the steps while the server fails, warns once, sends each step once, and a resume logs into the same run", async () => {
    // 503 for the first 3 requests, then cut connections for requests 6 to 8 (in the middle of the run).
    const { server, runs, problems } = await mlflowServer((i) =>
      i < 3 ? "503" : i >= 6 && i <= 8 ? "reset" : undefined,
    );
    try {
      const { recipe, out } = await setUp("logger: {backend: [mlflow]}\n", ["trainer.save_freq=2"]);
      const env = { ...process.env, MLFLOW_TRACKING_URI: server.url, MLFLOW_TRACKING_TOKEN: TOKEN };
      const first = capture();
      const done = await runRecipe(recipe, { outputDir: out, env, progress: first.progress, onEvent: first.onEvent });
      expect(done.steps).toBe(3);
      expect(server.faulted).toBe(6);
      expect(first.warnings).toHaveLength(1);
      expect(first.warnings[0]).toMatch(
        /^the MLflow logger could not send to http:\/\/127\.0\.0\.1:\d+ \(.*503.*\); it keeps the steps/,
      );
      expect(first.warnings[0]).not.toMatch(/\n\s+at /);
      // A second session resumes from the checkpoint of step 3 and trains step 4.
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
      const [run] = [...runs.values()] as [Run];
      const rows = await metricsRows(out);
      expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
      const logged = byStep(run);
      expect([...logged.keys()]).toEqual([1, 2, 3, 4]);
      for (const row of rows) expect(logged.get(row.step!)).toEqual(numbersOf(row));
      // The params were logged once, by the first session.
      expect(run.params.get("trainer.total_train_steps")).toBe("3");
      expect(run.statuses).toEqual(["RUNNING", "FINISHED", "RUNNING", "FINISHED"]);
      expect(await filesContaining(out, TOKEN)).toEqual([]);
      expect([...first.console, ...second.console].join("")).not.toContain(TOKEN);
    } finally {
      await server.close();
    }
  }, 60_000);

  it("says how many steps it could not send by the end of the run, and a resume sends them", async () => {
    let down = true;
    const { server, runs, problems } = await mlflowServer(() => (down ? "503" : undefined));
    try {
      const { recipe, out } = await setUp("logger: {backend: [mlflow], mlflow: {flush_timeout_seconds: 1}}\n", [
        "trainer.total_train_steps=2",
      ]);
      const env = { ...process.env, MLFLOW_TRACKING_URI: server.url, MLFLOW_TRACKING_TOKEN: TOKEN };
      const first = capture();
      expect((await runRecipe(recipe, { outputDir: out, env, onEvent: first.onEvent })).steps).toBe(2);
      expect(first.warnings).toEqual([
        expect.stringMatching(/^the MLflow logger could not send to /),
        expect.stringMatching(
          /^the MLflow logger could not send 2 of the 2 steps of this session to http:\/\/127\.0\.0\.1:\d+ within 1 s \(steps 1–2\); metrics\.jsonl has them, and a resume \(resume\.mode=auto\) sends them$/,
        ),
      ]);
      expect(runs.size).toBe(0);
      down = false;
      const second = capture();
      const resumed = await runRecipe(recipe.path, {
        outputDir: out,
        env,
        overrides: ["trainer.total_train_steps=3", "resume.mode=auto"],
        onEvent: second.onEvent,
      });
      expect(resumed.steps).toBe(3);
      expect(second.warnings).toEqual([]);
      expect(problems).toEqual([]);
      const [run] = [...runs.values()] as [Run];
      const rows = await metricsRows(out);
      const logged = byStep(run);
      expect([...logged.keys()]).toEqual([1, 2, 3]);
      for (const row of rows) expect(logged.get(row.step!)).toEqual(numbersOf(row));
      expect(run.statuses).toEqual(["RUNNING", "FINISHED"]);
    } finally {
      await server.close();
    }
  });

  it("records a stopped run as KILLED and a run an error ends as FAILED, with nexrl.status", async () => {
    const { server, runs, problems } = await mlflowServer();
    try {
      const env = { ...process.env, MLFLOW_TRACKING_URI: server.url, MLFLOW_TRACKING_TOKEN: TOKEN };
      const stopped = await setUp("logger: {backend: [mlflow], mlflow: {run_name: stopped}}\n");
      const controller = new AbortController();
      const result = await runRecipe(stopped.recipe, {
        outputDir: stopped.out,
        env,
        signal: controller.signal,
        onEvent: (event) => event.type === "step" && event.step === 1 && controller.abort(),
      });
      expect(result.stopReason).toBe("aborted");
      const failing = await setUp("logger: {backend: [mlflow], mlflow: {run_name: failing}}\n", [], {
        worker: fixture("failing-worker.ts"),
        className: "FailingWorker",
      });
      await expect(runRecipe(failing.recipe, { outputDir: failing.out, env })).rejects.toThrow(/worker crashed/);
      expect(problems).toEqual([]);
      const byName = new Map([...runs.values()].map((run) => [run.name, run]));
      expect(byName.get("stopped")).toMatchObject({ statuses: ["RUNNING", "KILLED"] });
      expect(byName.get("stopped")!.tags.get("nexrl.status")).toBe("stopped");
      expect([...byStep(byName.get("stopped")!).keys()]).toEqual((await metricsRows(stopped.out)).map((r) => r.step));
      expect(byName.get("failing")).toMatchObject({ statuses: ["RUNNING", "FAILED"] });
      expect(byName.get("failing")!.tags.get("nexrl.status")).toBe("failed");
    } finally {
      await server.close();
    }
  });

  it("does not send again a step an earlier session sent after the checkpoint a resume starts from, and says so", async () => {
    const { server, runs, problems } = await mlflowServer();
    try {
      const { recipe, out } = await setUp("logger: {backend: [mlflow]}\n", ["trainer.save_freq=2"]);
      const env = { ...process.env, MLFLOW_TRACKING_URI: server.url, MLFLOW_TRACKING_TOKEN: TOKEN };
      expect((await runRecipe(recipe, { outputDir: out, env })).steps).toBe(3);
      // As if the process had died before the checkpoint of step 3: the resume starts after step 2.
      await rm(join(out, "checkpoints", "step_000003.json"));
      const first = byStep([...runs.values()][0]!);
      const second = capture();
      const resumed = await runRecipe(recipe.path, {
        outputDir: out,
        env,
        overrides: ["trainer.save_freq=2", "resume.mode=auto"],
        onEvent: second.onEvent,
      });
      expect(resumed.steps).toBe(3);
      expect(second.warnings).toEqual([
        expect.stringMatching(
          /^the MLflow logger did not send steps 3–3 again: an earlier session had sent them, after the checkpoint this session resumed from/,
        ),
      ]);
      expect(problems).toEqual([]);
      expect(runs.size).toBe(1);
      const [run] = [...runs.values()] as [Run];
      expect(byStep(run)).toEqual(first);
      expect(run.statuses).toEqual(["RUNNING", "FINISHED", "RUNNING", "FINISHED"]);
    } finally {
      await server.close();
    }
  });
});
