/**
 * The Tinker checkpoint lifecycle of `nexrl serve`, the REST calls of the Tinker SDK's
 * `RestClient`: training runs (paginated) and one run, a run's checkpoints and every
 * checkpoint, archive URLs, delete, publish / unpublish and TTL. A checkpoint id is
 * `weights/<name>` or `sampler_weights/<name>`, as in its `tinker://<run>/<kind>/<name>` path.
 *
 * An archive URL points back at this server, at a path signed with a key of this server
 * process that expires after 15 minutes; the download needs no API key, like Tinker's signed
 * storage URLs. The archive is a gzipped tar holding the engine's file, `checkpoint.json`
 * (what it is) and the LoRA adapter in PEFT's format (`adapter_config.json`,
 * `adapter_model.safetensors`): the LoRA factors the model trained, as they are (see
 * `formats/lora-adapter.ts`).
 *
 * @module
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { decodeStateFile } from "../engine/state-file.js";
import { trainedLoraAdapter } from "../formats/lora-adapter.js";
import { writeTarGz } from "../formats/tar.js";
import type { RequestHandler } from "./handler.js";
import { parseBody, parseJsonBody, readBody, requestPath, sendJson } from "./io.js";
import type { Artifact, ModelStore, ServedModel } from "./models.js";
import { decodePathSegment } from "./url-path.js";
import { ProtocolError } from "../errors.js";

/** How long an archive URL stays valid, in milliseconds (Tinker's signed URLs: 15 minutes). */
const ARCHIVE_URL_TTL_MS = 15 * 60 * 1000;

const ARCHIVE_PREFIX = "/api/v1/checkpoint_archives/";

/** What a training run is, kept after its model is unloaded. */
interface TrainingRunRecord {
  id: string;
  baseModel: string;
  owner: string;
  loraRank: number | undefined;
  lastRequestTime: number;
}

/** Signs archive URLs and serves the archives they name. */
export class CheckpointArchives {
  private readonly key = randomBytes(32);

  constructor(private readonly store: ModelStore) {}

  /** A signed path (below the server's origin) for the archive of `tinkerPath`, and when it expires. */
  sign(tinkerPath: string, now = Date.now()): { path: string; expiresAt: number } {
    const expiresAt = now + ARCHIVE_URL_TTL_MS;
    const payload = Buffer.from(JSON.stringify({ p: tinkerPath, e: expiresAt })).toString("base64url");
    return { path: `${ARCHIVE_PREFIX}${payload}.${this.mac(payload)}`, expiresAt };
  }

  private mac(payload: string): string {
    return createHmac("sha256", this.key).update(payload).digest("base64url");
  }

  /** The tinker path a signed token names. @throws {@link ProtocolError} 403 when forged or expired. */
  private verify(token: string): string {
    const [payload = "", mac = ""] = token.split(".");
    const expected = Buffer.from(this.mac(payload));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new ProtocolError("this archive URL is not signed by this server; ask for a new one", {
        status: 403,
        code: "invalid_signature",
      });
    const { p, e } = JSON.parse(Buffer.from(payload, "base64url").toString()) as { p: string; e: number };
    if (e <= Date.now())
      throw new ProtocolError(
        `this archive URL expired at ${new Date(e).toISOString()}; ask for a new one (get_checkpoint_archive_url)`,
        { status: 403, code: "url_expired" },
      );
    return p;
  }

  /** The gzipped tar of the checkpoint at `tinkerPath`. @throws {@link ProtocolError} 404 when it is gone. */
  async archive(tinkerPath: string): Promise<Buffer> {
    const artifact = this.store.artifact(tinkerPath);
    const bytes = new Uint8Array(await readFile(artifact.file));
    const state = decodeStateFile(bytes, artifact.file);
    // Every Tinker model is a LoRA model (create_model), so every Tinker checkpoint holds factors.
    if (!state.lora)
      throw new ProtocolError(`${tinkerPath} holds full weights, not LoRA factors, so it has no adapter to archive`, {
        status: 409,
        code: "not_a_lora_checkpoint",
      });
    const adapter = trainedLoraAdapter(state.config, state.lora, artifact.baseModel);
    const json = (value: unknown): Uint8Array => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
    const description = {
      format: "nexrl-tinker-checkpoint",
      tinker_path: artifact.path,
      base_model: artifact.baseModel,
      seed: artifact.seed,
      lora_rank: state.lora.rank,
      lora_alpha: state.lora.alpha,
      engine_file: basename(artifact.file),
      config: state.config,
    };
    return writeTarGz(
      [
        { name: "adapter_config.json", data: json(adapter.config) },
        { name: "adapter_model.safetensors", data: adapter.safetensors },
        { name: "checkpoint.json", data: json(description) },
        { name: basename(artifact.file), data: bytes },
      ],
      artifact.createdAt / 1000,
    );
  }

  /** Serves `GET /api/v1/checkpoint_archives/<signed token>` (put before the API-key gate). */
  readonly handler: RequestHandler = async (req, res) => {
    const path = requestPath(req);
    if (req.method !== "GET" || !path.startsWith(ARCHIVE_PREFIX)) return false;
    const tinkerPath = this.verify(path.slice(ARCHIVE_PREFIX.length));
    const body = await this.archive(tinkerPath);
    const name = tinkerPath.slice("tinker://".length).replace(/[^A-Za-z0-9._-]+/g, "_");
    res.writeHead(200, {
      "content-type": "application/gzip",
      "content-length": body.length,
      "content-disposition": `attachment; filename="${name}.tar.gz"`,
    });
    res.end(body);
    return true;
  };
}

const ttlBody = z.object({ ttl_seconds: z.number().int().nullable() }).strict();

function page(url: URL, defaultLimit: number): { limit: number; offset: number } {
  const read = (name: string, fallback: number): number => {
    const raw = url.searchParams.get(name);
    const value = raw === null ? fallback : Number(raw);
    if (!Number.isInteger(value) || value < 0)
      throw new ProtocolError(`${name} must be a non-negative integer, got ${raw}`, {
        status: 400,
        code: "invalid_request",
      });
    return value;
  };
  return { limit: read("limit", defaultLimit), offset: read("offset", 0) };
}

const iso = (ms: number): string => new Date(ms).toISOString();

function checkpointJson(artifact: Artifact): Record<string, unknown> {
  const [, kind = "", name = ""] = /^tinker:\/\/[^/]+\/([^/]+)\/(.+)$/.exec(artifact.path) ?? [];
  return {
    checkpoint_id: `${kind}/${name}`,
    checkpoint_type: kind === "weights" ? "training" : "sampler",
    time: iso(artifact.createdAt),
    tinker_path: artifact.path,
    size_bytes: null,
    public: artifact.public,
    expires_at: artifact.expiresAt === undefined ? null : iso(artifact.expiresAt),
  };
}

/** The checkpoint REST calls of the Tinker protocol (see the module comment). */
export class TinkerCheckpoints {
  private readonly runs = new Map<string, TrainingRunRecord>();

  constructor(
    private readonly store: ModelStore,
    private readonly archives: CheckpointArchives,
  ) {}

  /** Records a model created by `create_model` as a training run. */
  recordRun(model: ServedModel): void {
    this.runs.set(model.id, {
      id: model.id,
      baseModel: model.baseModel,
      owner: model.owner,
      loraRank: model.loraRank,
      lastRequestTime: Date.now(),
    });
  }

  /** Notes a request to training run `id`. */
  touch(id: string): void {
    const run = this.runs.get(id);
    if (run) run.lastRequestTime = Date.now();
  }

  private run(id: string): TrainingRunRecord {
    const run = this.runs.get(id);
    if (!run)
      throw new ProtocolError(`no training run ${id} on this server; list them at GET /api/v1/training_runs`, {
        status: 404,
        code: "training_run_not_found",
      });
    return run;
  }

  private checkpointsOf(id: string): Artifact[] {
    return this.store.liveArtifacts().filter((a) => a.path.startsWith(`tinker://${id}/`));
  }

  private runJson(run: TrainingRunRecord): Record<string, unknown> {
    const checkpoints = this.checkpointsOf(run.id);
    const last = (kind: string): Record<string, unknown> | null => {
      const found = checkpoints.filter((a) => a.path.startsWith(`tinker://${run.id}/${kind}/`)).at(-1);
      return found ? checkpointJson(found) : null;
    };
    return {
      training_run_id: run.id,
      base_model: run.baseModel,
      model_owner: run.owner,
      is_lora: true,
      corrupted: false,
      lora_rank: run.loraRank ?? null,
      last_request_time: iso(run.lastRequestTime),
      last_checkpoint: last("weights"),
      last_sampler_checkpoint: last("sampler_weights"),
      user_metadata: null,
    };
  }

  /** The checkpoint `<kind>/<name>` of run `id`, known and not expired. */
  private checkpoint(id: string, kind: string, name: string): Artifact {
    if (kind !== "weights" && kind !== "sampler_weights")
      throw new ProtocolError(`checkpoint id "${kind}/${name}" must start with weights/ or sampler_weights/`, {
        status: 400,
        code: "invalid_checkpoint_id",
      });
    return this.store.artifact(`tinker://${id}/${kind}/${name}`);
  }

  private async archiveUrl(req: IncomingMessage, res: ServerResponse, artifact: Artifact): Promise<void> {
    const { path, expiresAt } = this.archives.sign(artifact.path);
    const url = `http://${req.headers.host ?? "127.0.0.1"}${path}`;
    // The SDK 0.25 asks for JSON and takes either answer; 0.19 asks for application/gzip (beside its
    // default application/json) and takes only the redirect, as do clients asking for nothing.
    const accept = req.headers.accept ?? "";
    if (accept.includes("application/json") && !accept.includes("application/gzip"))
      sendJson(res, 200, { url, expires: iso(expiresAt) });
    else {
      res.writeHead(302, { location: url, expires: new Date(expiresAt).toUTCString(), "content-length": 0 });
      res.end();
    }
  }

  /** Answers the request when it is one of these calls; false otherwise. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = requestPath(req);
    const method = req.method ?? "";
    if (method === "GET" && path === "/api/v1/training_runs") {
      const { limit, offset } = page(url, 20);
      const runs = [...this.runs.values()].reverse();
      sendJson(res, 200, {
        training_runs: runs.slice(offset, offset + limit).map((r) => this.runJson(r)),
        cursor: { offset, limit, total_count: runs.length },
      });
      return true;
    }
    if (method === "GET" && path === "/api/v1/checkpoints") {
      const { limit, offset } = page(url, 100);
      const all = this.store
        .liveArtifacts()
        .filter((a) => a.path.startsWith("tinker://"))
        .reverse();
      sendJson(res, 200, {
        checkpoints: all.slice(offset, offset + limit).map(checkpointJson),
        cursor: { offset, limit, total_count: all.length },
      });
      return true;
    }
    const match =
      /^\/api\/v1\/training_runs\/([^/]+)(?:\/checkpoints(?:\/([^/]+)\/([^/]+)(?:\/(archive|publish|ttl))?)?)?$/.exec(
        path,
      );
    if (!match) return false;
    const [, rawId = "", rawKind, rawName, action] = match;
    const id = decodePathSegment(rawId, "training run id");
    const endsWithCheckpoints = path.endsWith("/checkpoints");
    if (rawKind === undefined) {
      if (method !== "GET") return false;
      const run = this.run(id);
      if (endsWithCheckpoints)
        sendJson(res, 200, { checkpoints: this.checkpointsOf(id).map(checkpointJson), cursor: null });
      else sendJson(res, 200, this.runJson(run));
      return true;
    }
    const artifact = this.checkpoint(
      id,
      decodePathSegment(rawKind, "checkpoint kind"),
      decodePathSegment(rawName ?? "", "checkpoint name"),
    );
    const done = (): void => {
      res.writeHead(204);
      res.end();
    };
    if (action === undefined && method === "DELETE") {
      await this.store.removeArtifact(artifact.path);
      done();
    } else if (action === "archive" && method === "GET") await this.archiveUrl(req, res, artifact);
    else if (action === "publish" && (method === "POST" || method === "DELETE")) {
      const publish = method === "POST";
      if (artifact.public === publish)
        throw new ProtocolError(`${artifact.path} is already ${publish ? "public" : "private"}`, {
          status: 409,
          code: "conflict",
        });
      artifact.public = publish;
      done();
    } else if (action === "ttl" && method === "PUT") {
      const body = parseBody(ttlBody, "ttl", parseJsonBody(await readBody(req)));
      if (body.ttl_seconds !== null && body.ttl_seconds <= 0)
        throw new ProtocolError(`ttl_seconds must be positive or null, got ${body.ttl_seconds}`, {
          status: 400,
          code: "invalid_ttl",
        });
      artifact.expiresAt = body.ttl_seconds === null ? undefined : Date.now() + body.ttl_seconds * 1000;
      done();
    } else return false;
    return true;
  }
}
