/**
 * {@link WandbLogger}: a run's metrics on Weights & Biases, over the HTTP API its Python SDK
 * uses (W&B's JS SDK, `@wandb/sdk` 0.5.1, is a single beta release of December 2024). The run is
 * created, or updated on a resume, with the GraphQL mutation `upsertBucket` (project, entity,
 * display name, group, tags, and the resolved recipe, redacted, as its config); each step is a
 * line of `wandb-history.jsonl` (`_step`, `_runtime`, `_timestamp` and the numeric metrics),
 * sent through the run's file stream (`POST /files/{entity}/{project}/{run}/file_stream`) with
 * its line offset, which a request sent again repeats (the server places lines by offset, as the
 * Python SDK's resumes rely on); at the end `wandb-summary.json` (each metric's last value) and `complete` with the exit
 * code (0 finished, 1 failed, 255 stopped).
 *
 * The API key comes from `WANDB_API_KEY` (HTTP basic auth, user `api`), the server from
 * `logger.wandb.base_url`, else `WANDB_BASE_URL`, else `https://api.wandb.ai`. The run's id and
 * line count are kept in `wandb.json` in the run folder, so a resume continues the same run.
 * @module
 * @internal
 */
import { randomBytes } from "node:crypto";
import { basename, join } from "node:path";
import { RecipeError, UnexpectedResponseError } from "../../errors.js";
import { HttpTransport } from "../../http/transport.js";
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import type { MetricsRow } from "../events.js";
import type { RunEnd, RunStart, RunStatus } from "./types.js";
import { numericMetrics, RemoteLogger, type RemoteState } from "./remote.js";

/** What the `wandb` logger works with, from `logger.wandb` and the environment. */
export interface WandbSettings {
  baseUrl: string;
  apiKey: string;
  project: string;
  entity: string | undefined;
  runName: string | undefined;
  group: string | undefined;
  tags: readonly string[];
  flushTimeoutMs: number;
}

/** The settings of the `wandb` logger. @throws `RecipeError` without `WANDB_API_KEY`. */
export function wandbSettings(
  logger: RecipeConfig["logger"],
  env: Readonly<Record<string, string | undefined>>,
): WandbSettings {
  const options = logger.wandb;
  const apiKey = env.WANDB_API_KEY;
  if (!apiKey)
    throw RecipeError.fromIssues([
      {
        keyPath: `logger.backend[${logger.backend.indexOf("wandb")}]`,
        message:
          "the wandb logger needs an API key: set the environment variable WANDB_API_KEY (https://wandb.ai/authorize); nexrl reads it only from the environment",
      },
    ]);
  return {
    baseUrl: (options?.base_url ?? env.WANDB_BASE_URL ?? "https://api.wandb.ai").replace(/\/+$/, ""),
    apiKey,
    project: options?.project ?? env.WANDB_PROJECT ?? "uncategorized",
    entity: options?.entity ?? env.WANDB_ENTITY,
    runName: options?.run_name,
    group: options?.group,
    tags: options?.tags ?? [],
    flushTimeoutMs: (options?.flush_timeout_seconds ?? 60) * 1000,
  };
}

/** Lines of `wandb-history.jsonl` per file-stream request. */
const MAX_LINES = 500;

const EXIT_CODES: Readonly<Record<RunStatus, number>> = { finished: 0, failed: 1, stopped: 255 };

/** What `wandb.json` in the run folder holds (no credential). */
interface WandbState extends RemoteState {
  base_url: string;
  project: string;
  /** Known once the server has answered (the API key's default entity when none is set). */
  entity?: string;
  run_id: string;
  /** Lines of `wandb-history.jsonl` the server has: the offset of the next. */
  history_lines: number;
}

const UPSERT_RUN = `mutation UpsertRun($name: String, $project: String, $entity: String, $displayName: String, $groupName: String, $tags: [String!], $config: JSONString) {
  upsertBucket(input: {name: $name, modelName: $project, entityName: $entity, displayName: $displayName, groupName: $groupName, tags: $tags, config: $config}) {
    bucket { id name project { name entity { name } } }
  }
}`;

interface UpsertAnswer {
  data?: {
    upsertBucket?: {
      bucket?: { name?: string; project?: { name?: string; entity?: { name?: string } } };
    };
  };
  errors?: Array<{ message?: string }>;
}

/** A W&B run id: 8 characters of `[a-z0-9]`, as the SDK makes them. */
function runId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(8)].map((byte) => alphabet[byte % alphabet.length]).join("");
}

/** A recipe as W&B config: each top-level section a `{ value }` entry. */
const wandbConfig = (config: unknown): Record<string, { value: unknown }> =>
  Object.fromEntries(
    Object.entries(config !== null && typeof config === "object" ? config : {}).map(([key, value]) => [key, { value }]),
  );

/** Logs a run to Weights & Biases; see the module's comment. */
export class WandbLogger extends RemoteLogger<WandbState> {
  private readonly http: HttpTransport;
  /** Whether this session has upserted the run (each session does, first). */
  private upserted = false;
  private endSent = false;
  private readonly startedAt = Date.now();
  /** Each metric's last value, for the summary. */
  private readonly last = new Map<string, number>();
  private lastStep = 0;

  private constructor(
    private readonly settings: WandbSettings,
    state: WandbState,
    start: RunStart,
  ) {
    super("W&B", join(start.outputDir, "wandb.json"), state, start, settings.flushTimeoutMs);
    this.http = new HttpTransport({
      baseUrl: settings.baseUrl,
      maxRetries: 0,
      timeoutMs: 30_000,
      apiKey: Buffer.from(`api:${settings.apiKey}`).toString("base64"),
      apiKeyHeader: "Authorization",
      apiKeyScheme: "Basic",
      apiKeySource: "WANDB_API_KEY",
    });
    for (const row of start.earlierRows) this.remember(row);
  }

  /** A logger for the run of `start`: the W&B run of the folder's `wandb.json` on a resume, else a new one. */
  static async open(settings: WandbSettings, start: RunStart): Promise<WandbLogger> {
    const saved = await RemoteLogger.readState<WandbState>(start, "wandb.json");
    const reuse = saved !== undefined && saved.base_url === settings.baseUrl && saved.project === settings.project;
    if (saved && !reuse)
      start.warn(
        `wandb.json names a run of project ${saved.project} on ${saved.base_url}: this session logs into a new W&B run of ${settings.project} on ${settings.baseUrl}`,
      );
    const state: WandbState = reuse
      ? saved
      : {
          base_url: settings.baseUrl,
          project: settings.project,
          ...(settings.entity !== undefined && { entity: settings.entity }),
          run_id: runId(),
          history_lines: 0,
          sent_through: -1,
        };
    const logger = new WandbLogger(settings, state, start);
    logger.begin();
    return logger;
  }

  protected get where(): string {
    return this.settings.baseUrl;
  }

  override async step(row: MetricsRow): Promise<void> {
    this.remember(row);
    await super.step(row);
  }

  protected async send(): Promise<void> {
    if (!this.upserted) await this.upsertRun();
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, MAX_LINES);
      const content = batch.map(({ row, time }) =>
        JSON.stringify({
          ...Object.fromEntries(numericMetrics(row)),
          _step: row.step,
          _runtime: (time - this.startedAt) / 1000,
          _timestamp: time / 1000,
        }),
      );
      await this.fileStream({ files: { "wandb-history.jsonl": { offset: this.state.history_lines, content } } });
      this.state.history_lines += batch.length;
      await this.acknowledge(batch.length);
    }
    if (this.ended && !this.endSent) {
      const summary = {
        ...Object.fromEntries(this.last),
        _step: this.lastStep,
        _runtime: (Date.now() - this.startedAt) / 1000,
        "nexrl/status": this.ended.status,
      };
      await this.fileStream({ files: { "wandb-summary.json": { offset: 0, content: [JSON.stringify(summary)] } } });
      await this.fileStream({ complete: true, exitcode: EXIT_CODES[this.ended.status] });
      this.endSent = true;
    }
  }

  private remember(row: MetricsRow): void {
    for (const [key, value] of numericMetrics(row)) this.last.set(key, value);
    this.lastStep = Math.max(this.lastStep, row.step);
  }

  private async upsertRun(): Promise<void> {
    const { settings, state } = this;
    const { body } = await this.http.request<UpsertAnswer>({
      method: "POST",
      path: "/graphql",
      body: {
        query: UPSERT_RUN,
        variables: {
          name: state.run_id,
          project: state.project,
          entity: state.entity ?? null,
          displayName: settings.runName ?? basename(this.start.outputDir),
          groupName: settings.group ?? null,
          tags: settings.tags,
          config: JSON.stringify(wandbConfig(this.start.config)),
        },
      },
      retry: "none",
    });
    this.progressed();
    const bucket = body?.data?.upsertBucket?.bucket;
    const entity = bucket?.project?.entity?.name;
    if (body?.errors?.length || typeof entity !== "string")
      throw new UnexpectedResponseError(
        `upsertBucket failed: ${body?.errors?.map((e) => e.message).join("; ") ?? "the answer names no entity"}`,
      );
    state.entity = entity;
    await this.saveState();
    this.upserted = true;
  }

  private async fileStream(body: unknown): Promise<void> {
    const { entity, project, run_id: run } = this.state;
    await this.http.request({
      method: "POST",
      path: `/files/${[entity!, project, run].map(encodeURIComponent).join("/")}/file_stream`,
      body,
      retry: "none",
    });
    this.progressed();
  }

  override async end(end: RunEnd): Promise<void> {
    await super.end(end);
    await this.http.close();
  }
}
