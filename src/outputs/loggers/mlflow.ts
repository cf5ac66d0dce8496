/**
 * {@link MlflowLogger}: a run's metrics on an MLflow tracking server, over its REST API
 * (`/api/2.0/mlflow/…`): the experiment is found by name (`experiments/get-by-name`) or created,
 * the run created (`runs/create`, with `mlflow.runName` and `nexrl.*` tags), the resolved recipe
 * (redacted, flattened to `section.key` params) and each step's metrics sent with
 * `runs/log-batch` (within its limits: 1000 metrics, 100 params, 100 tags, 1000 items per
 * request), and the end recorded with `runs/update` (`FINISHED`, `FAILED` or `KILLED`).
 *
 * Credentials come from the environment as MLflow's own clients read them:
 * `MLFLOW_TRACKING_TOKEN` (a bearer token), else `MLFLOW_TRACKING_USERNAME` and
 * `MLFLOW_TRACKING_PASSWORD` (basic auth). The run's id is kept in `mlflow.json` in the run
 * folder, so a resume logs into the same MLflow run.
 * @module
 * @internal
 */
import { basename, join } from "node:path";
import { APIError, RecipeError } from "../../errors.js";
import { HttpTransport } from "../../http/transport.js";
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import { appendAll } from "../../wire/arrays.js";
import type { RunEnd, RunStart, RunStatus } from "./types.js";
import { numericMetrics, RemoteLogger, type RemoteState } from "./remote.js";

/** What the `mlflow` logger works with, from `logger.mlflow` and the environment. */
export interface MlflowSettings {
  trackingUri: string;
  experimentName: string;
  runName: string | undefined;
  tags: Readonly<Record<string, string>>;
  flushTimeoutMs: number;
  /** The `Authorization` header's scheme and credentials, when the environment gives them. */
  auth: { scheme: "Bearer" | "Basic"; credentials: string } | undefined;
}

/** The settings of the `mlflow` logger. @throws `RecipeError` without a usable tracking server. */
export function mlflowSettings(
  logger: RecipeConfig["logger"],
  env: Readonly<Record<string, string | undefined>>,
): MlflowSettings {
  const options = logger.mlflow;
  const uri = options?.tracking_uri ?? env.MLFLOW_TRACKING_URI;
  const keyPath = "logger.mlflow.tracking_uri";
  if (uri === undefined || uri === "")
    throw RecipeError.fromIssues([
      {
        keyPath,
        message:
          "the mlflow logger needs a tracking server: set logger.mlflow.tracking_uri (http://host:5000) or the environment variable MLFLOW_TRACKING_URI",
      },
    ]);
  if (!/^https?:\/\//i.test(uri))
    throw RecipeError.fromIssues([
      {
        keyPath,
        message: `MLFLOW_TRACKING_URI is ${uri}: the mlflow logger talks to a tracking server over HTTP (http:// or https://), not to a local folder or a Databricks profile; start \`mlflow server\` and point MLFLOW_TRACKING_URI or logger.mlflow.tracking_uri at it`,
      },
    ]);
  const token = env.MLFLOW_TRACKING_TOKEN;
  const [user, password] = [env.MLFLOW_TRACKING_USERNAME, env.MLFLOW_TRACKING_PASSWORD];
  return {
    trackingUri: uri.replace(/\/+$/, ""),
    experimentName: options?.experiment_name ?? "Default",
    runName: options?.run_name,
    tags: options?.tags ?? {},
    flushTimeoutMs: (options?.flush_timeout_seconds ?? 60) * 1000,
    auth: token
      ? { scheme: "Bearer", credentials: token }
      : user && password
        ? { scheme: "Basic", credentials: Buffer.from(`${user}:${password}`).toString("base64") }
        : undefined,
  };
}

/** `runs/log-batch` limits (MLflow's REST API reference). */
const MAX_METRICS = 1000;
const MAX_PARAMS = 100;
/** Longest param value MLflow 2 stores, and longest key and tag value. */
const MAX_PARAM_VALUE = 6000;
const MAX_KEY = 250;
const MAX_TAG_VALUE = 5000;

const STATUS: Readonly<Record<RunStatus, string>> = { finished: "FINISHED", failed: "FAILED", stopped: "KILLED" };

/** What `mlflow.json` in the run folder holds (no credential). */
interface MlflowState extends RemoteState {
  tracking_uri: string;
  experiment_id?: string;
  run_id?: string;
  /** Whether the recipe's params were logged (params cannot change once logged). */
  params_logged: boolean;
}

type KeyValue = { key: string; value: string };

/** An MLflow key: characters it refuses (outside letters, digits, `_-. :/`) become `_`, at most 250. */
const mlflowKey = (key: string): string => key.replace(/[^\w\-. :/]/g, "_").slice(0, MAX_KEY);

/** The params of a resolved recipe: one per leaf, `section.key` (lists as JSON), values cut to MLflow's limit. */
function recipeParams(config: unknown): KeyValue[] {
  const params = new Map<string, string>();
  const visit = (value: unknown, path: string): void => {
    if (value === undefined) return;
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      for (const [key, child] of Object.entries(value)) visit(child, path ? `${path}.${key}` : key);
      return;
    }
    const text = typeof value === "string" ? value : JSON.stringify(value);
    // Two keys that differ only in characters MLflow refuses: the first is kept (a param logs once).
    if (!params.has(mlflowKey(path))) params.set(mlflowKey(path), text.slice(0, MAX_PARAM_VALUE));
  };
  visit(config, "");
  return [...params].map(([key, value]) => ({ key, value }));
}

/** Logs a run to an MLflow tracking server; see the module's comment. */
export class MlflowLogger extends RemoteLogger<MlflowState> {
  private readonly http: HttpTransport;
  private readonly params: KeyValue[];
  /** Set while a resumed run has not been marked running again. */
  private reopen: boolean;
  private endSent = false;

  private constructor(
    private readonly settings: MlflowSettings,
    state: MlflowState,
    start: RunStart,
  ) {
    super("MLflow", join(start.outputDir, "mlflow.json"), state, start, settings.flushTimeoutMs);
    this.http = new HttpTransport({
      baseUrl: settings.trackingUri,
      maxRetries: 0,
      timeoutMs: 30_000,
      ...(settings.auth && {
        apiKey: settings.auth.credentials,
        apiKeyHeader: "Authorization",
        apiKeyScheme: settings.auth.scheme,
        apiKeySource: settings.auth.scheme === "Bearer" ? "MLFLOW_TRACKING_TOKEN" : "MLFLOW_TRACKING_PASSWORD",
      }),
    });
    this.params = state.params_logged ? [] : recipeParams(start.config);
    this.reopen = state.run_id !== undefined;
  }

  /** A logger for the run of `start`: the MLflow run of the folder's `mlflow.json` on a resume, else a new one. */
  static async open(settings: MlflowSettings, start: RunStart): Promise<MlflowLogger> {
    const saved = await RemoteLogger.readState<MlflowState>(start, "mlflow.json");
    const reuse = saved?.run_id !== undefined && saved.tracking_uri === settings.trackingUri;
    if (saved && !reuse)
      start.warn(
        `mlflow.json names a run on ${saved.tracking_uri}, not on ${settings.trackingUri}: this session logs into a new MLflow run`,
      );
    const state: MlflowState = reuse
      ? saved
      : { tracking_uri: settings.trackingUri, sent_through: -1, params_logged: false };
    const logger = new MlflowLogger(settings, state, start);
    logger.begin();
    return logger;
  }

  protected get where(): string {
    return this.settings.trackingUri;
  }

  protected async send(): Promise<void> {
    if (this.state.run_id === undefined) await this.createRun();
    const runId = this.state.run_id!;
    if (this.reopen) {
      await this.post("runs/update", { run_id: runId, status: "RUNNING" });
      this.reopen = false;
    }
    while (this.params.length > 0) {
      const batch = this.params.slice(0, MAX_PARAMS);
      await this.post("runs/log-batch", { run_id: runId, params: batch });
      this.params.splice(0, batch.length);
      if (this.params.length === 0) {
        this.state.params_logged = true;
        await this.saveState();
      }
    }
    while (this.queue.length > 0) await this.sendMetrics(runId);
    if (this.ended && !this.endSent) {
      const { status, summary } = this.ended;
      const tags: KeyValue[] = [
        { key: "nexrl.status", value: status },
        { key: "nexrl.summary", value: JSON.stringify(summary).slice(0, MAX_TAG_VALUE) },
      ];
      await this.post("runs/log-batch", { run_id: runId, tags });
      await this.post("runs/update", { run_id: runId, status: STATUS[status], end_time: Date.now() });
      this.endSent = true;
    }
  }

  /** Sends the oldest queued rows, whole, up to 1000 metrics (a larger row alone, in parts). */
  private async sendMetrics(runId: string): Promise<void> {
    const metrics: Array<{ key: string; value: number; timestamp: number; step: number }> = [];
    let rows = 0;
    for (const { row, time } of this.queue) {
      const values = numericMetrics(row).map(([key, value]) => ({
        key: mlflowKey(key),
        value,
        timestamp: time,
        step: row.step,
      }));
      if (rows > 0 && metrics.length + values.length > MAX_METRICS) break;
      appendAll(metrics, values);
      rows += 1;
    }
    // A retry sends the same metrics with the same timestamps: a store that keys metrics by
    // (key, value, timestamp, step), as MLflow's SQL store does, keeps a part sent twice once.
    for (let at = 0; at < metrics.length; at += MAX_METRICS)
      await this.post("runs/log-batch", { run_id: runId, metrics: metrics.slice(at, at + MAX_METRICS) });
    await this.acknowledge(rows);
  }

  private async createRun(): Promise<void> {
    this.state.experiment_id ??= await this.experimentId();
    const tags: KeyValue[] = [
      ...Object.entries(this.settings.tags).map(([key, value]) => ({
        key: mlflowKey(key),
        value: value.slice(0, MAX_TAG_VALUE),
      })),
      { key: "mlflow.source.name", value: "nexrl" },
      { key: "nexrl.run_dir", value: this.start.outputDir.slice(0, MAX_TAG_VALUE) },
    ];
    const body = (
      await this.post("runs/create", {
        experiment_id: this.state.experiment_id,
        run_name: this.settings.runName ?? basename(this.start.outputDir),
        start_time: Date.now(),
        tags,
      })
    ).body as { run?: { info?: { run_id?: unknown } } };
    const runId = body.run?.info?.run_id;
    if (typeof runId !== "string") throw new Error(`runs/create answered without run.info.run_id`);
    this.state.run_id = runId;
    await this.saveState();
  }

  /** The id of the experiment named in the settings, created when missing. */
  private async experimentId(): Promise<string> {
    const name = this.settings.experimentName;
    const found = await this.findExperiment(name);
    if (found !== undefined) return found;
    try {
      const body = (await this.post("experiments/create", { name })).body as { experiment_id?: unknown };
      if (typeof body.experiment_id === "string") return body.experiment_id;
      throw new Error("experiments/create answered without experiment_id");
    } catch (error) {
      // Created meanwhile by another run.
      const again = error instanceof APIError && error.status === 400 ? await this.findExperiment(name) : undefined;
      if (again !== undefined) return again;
      throw error;
    }
  }

  private async findExperiment(name: string): Promise<string | undefined> {
    try {
      const { body } = await this.http.request<{ experiment?: { experiment_id?: unknown } }>({
        method: "GET",
        path: `/api/2.0/mlflow/experiments/get-by-name?experiment_name=${encodeURIComponent(name)}`,
        retry: "none",
      });
      this.progressed();
      const id = body?.experiment?.experiment_id;
      return typeof id === "string" ? id : undefined;
    } catch (error) {
      if (error instanceof APIError && error.status === 404) return undefined;
      throw error;
    }
  }

  private async post(endpoint: string, body: unknown): ReturnType<HttpTransport["request"]> {
    const response = await this.http.request({
      method: "POST",
      path: `/api/2.0/mlflow/${endpoint}`,
      body,
      retry: "none",
    });
    this.progressed();
    return response;
  }

  override async end(end: RunEnd): Promise<void> {
    await super.end(end);
    await this.http.close();
  }
}
