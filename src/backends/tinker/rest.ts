/**
 * {@link TinkerRestClient}: the checkpoint calls of a Tinker service (the SDK's `RestClient`):
 * training runs, checkpoints, archive URLs and downloads, delete, publish and TTL.
 *
 * @module
 */
import type { TinkerContext } from "./context.js";
import { APIError, InputError, UnexpectedResponseError } from "../../errors.js";

/** A checkpoint of a Tinker training run. */
export interface TinkerCheckpoint {
  /** `weights/<name>` (a training checkpoint) or `sampler_weights/<name>`. */
  checkpointId: string;
  /** `training` or `sampler`. */
  checkpointType: "training" | "sampler";
  /** When it was saved. */
  time: Date;
  /** `tinker://<run>/<kind>/<name>`. */
  tinkerPath: string;
  /** Its size, when the service says. */
  sizeBytes: number | undefined;
  /** Whether it was published. */
  public: boolean;
  /** When it expires; undefined: never. */
  expiresAt: Date | undefined;
}

/** A Tinker training run (a model created by `create_model`). */
export interface TinkerTrainingRun {
  /** Its id (the model id). */
  trainingRunId: string;
  /** The base model. */
  baseModel: string;
  /** Who made it. */
  modelOwner: string;
  /** Whether it trains a LoRA adapter. */
  isLora: boolean;
  /** The LoRA rank, when it is one. */
  loraRank: number | undefined;
  /** When it was last used. */
  lastRequestTime: Date;
  /** The newest training checkpoint. */
  lastCheckpoint: TinkerCheckpoint | undefined;
  /** The newest sampler checkpoint. */
  lastSamplerCheckpoint: TinkerCheckpoint | undefined;
}

/** One page of a listing and where it is in the whole. */
export interface TinkerPage<T> {
  /** The items of this page. */
  items: T[];
  /** The offset and limit asked for and how many items there are in all (undefined when the service does not page). */
  cursor:
    | {
        /** The offset asked for. */
        offset: number;
        /** The most items asked for. */
        limit: number;
        /** How many items the list holds in all. */
        totalCount: number;
      }
    | undefined;
}

/** A `tinker://<run>/<weights|sampler_weights>/<name>` path taken apart. */
export interface ParsedTinkerPath {
  /** The training run id. */
  trainingRunId: string;
  /** `weights/<name>` or `sampler_weights/<name>`. */
  checkpointId: string;
}

/**
 * Takes a checkpoint path apart as the SDK does.
 * @throws {@link "nexrl/errors".InputError | InputError} for anything but `tinker://<run>/<weights|sampler_weights>/<name>`.
 */
export function parseTinkerPath(path: string): ParsedTinkerPath {
  const parts = path.startsWith("tinker://") ? path.slice("tinker://".length).split("/") : [];
  if (parts.length !== 3 || !parts[0] || !parts[2] || (parts[1] !== "weights" && parts[1] !== "sampler_weights"))
    throw new InputError(
      `"${path}" is not a Tinker checkpoint path; give tinker://<run>/weights/<name> or tinker://<run>/sampler_weights/<name>`,
    );
  return { trainingRunId: parts[0], checkpointId: `${parts[1]}/${parts[2]}` };
}

function record(value: unknown, what: string): Record<string, unknown> {
  if (!value || typeof value !== "object") throw new UnexpectedResponseError(`${what} answered without a JSON object`);
  return value as Record<string, unknown>;
}

function date(value: unknown): Date | undefined {
  return typeof value === "string" || typeof value === "number" ? new Date(value) : undefined;
}

function checkpoint(value: unknown): TinkerCheckpoint {
  const c = record(value, "a checkpoint listing");
  if (typeof c["tinker_path"] !== "string" || typeof c["checkpoint_id"] !== "string")
    throw new UnexpectedResponseError("a checkpoint was listed without tinker_path or checkpoint_id");
  return {
    checkpointId: c["checkpoint_id"],
    checkpointType: c["checkpoint_type"] === "training" ? "training" : "sampler",
    time: date(c["time"]) ?? new Date(0),
    tinkerPath: c["tinker_path"],
    sizeBytes: typeof c["size_bytes"] === "number" ? c["size_bytes"] : undefined,
    public: c["public"] === true,
    expiresAt: date(c["expires_at"]),
  };
}

function trainingRun(value: unknown): TinkerTrainingRun {
  const r = record(value, "a training run");
  if (typeof r["training_run_id"] !== "string")
    throw new UnexpectedResponseError("a training run was answered without training_run_id");
  return {
    trainingRunId: r["training_run_id"],
    baseModel: String(r["base_model"]),
    modelOwner: String(r["model_owner"]),
    isLora: r["is_lora"] === true,
    loraRank: typeof r["lora_rank"] === "number" ? r["lora_rank"] : undefined,
    lastRequestTime: date(r["last_request_time"]) ?? new Date(0),
    lastCheckpoint: r["last_checkpoint"] ? checkpoint(r["last_checkpoint"]) : undefined,
    lastSamplerCheckpoint: r["last_sampler_checkpoint"] ? checkpoint(r["last_sampler_checkpoint"]) : undefined,
  };
}

function cursor(value: unknown): TinkerPage<unknown>["cursor"] {
  if (!value || typeof value !== "object") return undefined;
  const c = value as Record<string, unknown>;
  return { offset: Number(c["offset"]), limit: Number(c["limit"]), totalCount: Number(c["total_count"]) };
}

const segment = (id: string): string => encodeURIComponent(id);
/** `/api/v1/training_runs/<run>/checkpoints/<kind>/<name>` of a checkpoint path. */
function checkpointUrl(path: string): string {
  const { trainingRunId, checkpointId } = parseTinkerPath(path);
  const [kind = "", name = ""] = checkpointId.split("/");
  return `/api/v1/training_runs/${segment(trainingRunId)}/checkpoints/${kind}/${segment(name)}`;
}

/**
 * The checkpoint calls of a Tinker service, on the connection of a
 * {@link TinkerTrainingService} (from its `rest()`).
 *
 * @example
 * ```ts
 * const rest = await service.rest();
 * const { items } = await rest.listCheckpoints(runId);
 * const archive = await rest.downloadCheckpointArchive(items[0].tinkerPath); // a .tar.gz
 * ```
 */
export class TinkerRestClient {
  /** @internal */
  constructor(private readonly ctx: TinkerContext) {}

  private async get(path: string, what: string): Promise<Record<string, unknown>> {
    const { body } = await this.ctx.request<unknown>({ method: "GET", path, retry: "all" });
    return record(body, what);
  }

  /** Training runs, newest first (`limit` 20 by default). */
  async listTrainingRuns(options: { limit?: number; offset?: number } = {}): Promise<TinkerPage<TinkerTrainingRun>> {
    const query = `limit=${options.limit ?? 20}&offset=${options.offset ?? 0}`;
    const body = await this.get(`/api/v1/training_runs?${query}`, "GET /api/v1/training_runs");
    const runs = Array.isArray(body["training_runs"]) ? body["training_runs"] : [];
    return { items: runs.map(trainingRun), cursor: cursor(body["cursor"]) };
  }

  /** One training run. */
  async getTrainingRun(trainingRunId: string): Promise<TinkerTrainingRun> {
    return trainingRun(await this.get(`/api/v1/training_runs/${segment(trainingRunId)}`, "GET a training run"));
  }

  /** The checkpoints of one run (training and sampler). */
  async listCheckpoints(trainingRunId: string): Promise<TinkerPage<TinkerCheckpoint>> {
    const body = await this.get(`/api/v1/training_runs/${segment(trainingRunId)}/checkpoints`, "GET checkpoints");
    const list = Array.isArray(body["checkpoints"]) ? body["checkpoints"] : [];
    return { items: list.map(checkpoint), cursor: cursor(body["cursor"]) };
  }

  /** Every checkpoint of the key's owner, newest first (`limit` 100 by default). */
  async listUserCheckpoints(options: { limit?: number; offset?: number } = {}): Promise<TinkerPage<TinkerCheckpoint>> {
    const query = `limit=${options.limit ?? 100}&offset=${options.offset ?? 0}`;
    const body = await this.get(`/api/v1/checkpoints?${query}`, "GET /api/v1/checkpoints");
    const list = Array.isArray(body["checkpoints"]) ? body["checkpoints"] : [];
    return { items: list.map(checkpoint), cursor: cursor(body["cursor"]) };
  }

  /**
   * A signed URL of the checkpoint's archive and when it expires. Takes both answers Tinker
   * services give: 200 with `{url, expires}`, or a 302 redirect (its `Expires` header, else 15
   * minutes).
   */
  async checkpointArchiveUrl(tinkerPath: string): Promise<{
    /** The URL (it needs no API key). */
    url: string;
    /** When it stops working. */
    expires: Date;
  }> {
    const path = `${checkpointUrl(tinkerPath)}/archive`;
    try {
      const { body } = await this.ctx.request<unknown>({
        method: "GET",
        path,
        headers: { accept: "application/json" },
        retry: "all",
      });
      const answer = record(body, "GET …/archive");
      if (typeof answer["url"] !== "string") throw new UnexpectedResponseError("GET …/archive answered without a url");
      return { url: answer["url"], expires: date(answer["expires"]) ?? new Date(Date.now() + 15 * 60_000) };
    } catch (error) {
      if (!(error instanceof APIError) || error.status !== 302 || error.headers["location"] === undefined) throw error;
      const location = error.headers["location"];
      const header = error.headers["expires"];
      const expires = header !== undefined && !Number.isNaN(Date.parse(header)) ? new Date(header) : undefined;
      return { url: location, expires: expires ?? new Date(Date.now() + 15 * 60_000) };
    }
  }

  /** The checkpoint's archive (a gzipped tar), downloaded from its signed URL (no API key is sent there). */
  async downloadCheckpointArchive(tinkerPath: string): Promise<Uint8Array> {
    const { url } = await this.checkpointArchiveUrl(tinkerPath);
    const response = await fetch(url, { signal: this.ctx.closed });
    if (!response.ok)
      throw new UnexpectedResponseError(
        `downloading the archive of ${tinkerPath} answered HTTP ${response.status}; the signed URL may have expired, try again`,
      );
    return new Uint8Array(await response.arrayBuffer());
  }

  /** Deletes a checkpoint. */
  async deleteCheckpoint(tinkerPath: string): Promise<void> {
    await this.ctx.request({ method: "DELETE", path: checkpointUrl(tinkerPath), retry: "all" });
  }

  /** Publishes (`true`) or unpublishes (`false`) a checkpoint. */
  async setCheckpointPublic(tinkerPath: string, published: boolean): Promise<void> {
    await this.ctx.request({
      method: published ? "POST" : "DELETE",
      path: `${checkpointUrl(tinkerPath)}/publish`,
      retry: "unsent",
    });
  }

  /** Makes a checkpoint expire `ttlSeconds` from now, or never (`null`). */
  async setCheckpointTtl(tinkerPath: string, ttlSeconds: number | null): Promise<void> {
    await this.ctx.request({
      method: "PUT",
      path: `${checkpointUrl(tinkerPath)}/ttl`,
      body: { ttl_seconds: ttlSeconds },
      retry: "all",
    });
  }
}
