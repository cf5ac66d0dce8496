/**
 * {@link WeaverTrainingService}: a Weaver service (nex-agi's Weaver, or `nexrl serve`) as a
 * {@link TrainingService}.
 *
 * @module
 */
import { RemoteSession, type OpenedSession, type RemoteServiceOptions } from "../remote/session.js";
import type { CreateTrainingClientOptions, TrainingService } from "../../contracts/training.js";
import type { WeaverContext } from "./context.js";
import { field, stringField } from "./fields.js";
import { DEFAULT_POLL, WeaverOperation, type PollOptions } from "./operation.js";
import { WeaverSamplingClient } from "./sampling-client.js";
import { WeaverTrainingClient } from "./training-client.js";

/** nex-agi's Weaver console. */
export const WEAVER_DEFAULT_BASE_URL = "https://weaver-console.nex-agi.cn";

/** Announced as `sdk_version` when the session is created. */
const SDK_VERSION = "nexrl-0.1";

/** Options of {@link WeaverTrainingService}; the key and URL fall back to `WEAVER_API_KEY` and `WEAVER_BASE_URL`. */
export interface WeaverServiceOptions extends RemoteServiceOptions {
  /** Operation polling: first interval (500 ms), cap (10 000 ms), transient failures tolerated (20). */
  poll?: Partial<PollOptions>;
}

/**
 * A Weaver service: `WEAVER_API_KEY` (sent as `X-WEAVER-API-KEY`) and `WEAVER_BASE_URL`, or the
 * options. `connect()` creates a session and starts heartbeats (which never keep the process
 * alive); `close()` terminates every model this service created, stops the heartbeats and
 * aborts polls in flight.
 *
 * Requests are retried only where that is safe: GETs, and requests whose connection was never
 * made. A submitted operation that fails in transit is reported, never sent twice.
 */
export class WeaverTrainingService implements TrainingService {
  /** Always `weaver`. */
  readonly backend = "weaver" as const;
  private readonly remote: RemoteSession<WeaverContext>;
  private readonly models = new Map<string, WeaverTrainingClient>();
  private nextModelSeq = 1;
  private nextSamplerSeq = 1;

  /**
   * @param options key, base URL, timeouts, retries and polling.
   * @throws ConfigError when neither `apiKey` nor `WEAVER_API_KEY` is set.
   */
  constructor(private readonly options: WeaverServiceOptions = {}) {
    this.remote = new RemoteSession(
      {
        service: "Weaver",
        keyHeader: "X-WEAVER-API-KEY",
        defaultUrl: WEAVER_DEFAULT_BASE_URL,
        heartbeatIntervalMs: 30_000,
      },
      options,
      () => this.open(),
    );
  }

  /** Creates the session and starts heartbeats (once; a failed attempt can be repeated). */
  async connect(): Promise<void> {
    await this.remote.context();
  }

  /**
   * Creates a model (`POST /sessions/{id}/models`): `trainingMode` `lora` (default, with
   * `loraRank`, default 32) or `full_ft`. The seed is sent in the LoRA config, so it applies to
   * LoRA models only.
   */
  async createTrainingClient(options: CreateTrainingClientOptions): Promise<WeaverTrainingClient> {
    const ctx = await this.remote.context();
    const trainingMode = options.trainingMode ?? "lora";
    const { body } = await ctx.http.request({
      method: "POST",
      path: `/api/v1/sessions/${encodeURIComponent(ctx.sessionId)}/models`,
      body: {
        model_seq_id: this.nextModelSeq++,
        base_model: options.baseModel,
        training_mode: trainingMode,
        ...(trainingMode === "lora" && {
          lora_config: {
            rank: options.loraRank ?? 32,
            train_unembed: true,
            train_mlp: true,
            train_attn: true,
            ...(options.seed !== undefined && { seed: options.seed }),
          },
        }),
      },
      retry: "unsent",
    });
    const client = new WeaverTrainingClient(
      ctx,
      stringField(body, "id", "create model"),
      options.baseModel,
      trainingMode,
    );
    this.models.set(client.modelId, client);
    return client;
  }

  /**
   * Opens a sampling session (`POST /sessions/{id}/sampling-sessions`) on a `weaver://` sampler
   * path or checkpoint, or on a base model by name, waiting for the session's load operation
   * when the service answers 202.
   */
  async createSamplingClient(path: string): Promise<WeaverSamplingClient> {
    const ctx = await this.remote.context();
    const modelId = path.startsWith("weaver://") ? path.slice("weaver://".length).split("/")[0] : undefined;
    const model = modelId === undefined ? undefined : this.models.get(modelId);
    const { status, body } = await ctx.http.request({
      method: "POST",
      path: `/api/v1/sessions/${encodeURIComponent(ctx.sessionId)}/sampling-sessions`,
      body: {
        // As the Weaver SDK's create_sampling_client: both keys always, null for the one not given.
        sampling_session_seq_id: this.nextSamplerSeq++,
        base_model: modelId === undefined ? path : null,
        model_path: modelId === undefined ? null : path,
        ...(modelId !== undefined && { model_id: modelId }),
      },
      retry: "unsent",
    });
    let session = body;
    if (status === 202) {
      session = field(body, "sampling_session");
      await new WeaverOperation(
        ctx,
        field(body, "sync_operation"),
        () => undefined,
        `sampling session for ${path}`,
      ).result();
    }
    return new WeaverSamplingClient(
      ctx,
      path,
      stringField(session, "id", "create sampling session"),
      model?.trainingMode,
    );
  }

  /** Terminates the models this service created, stops heartbeats and releases connections. */
  async close(): Promise<void> {
    await this.remote.close("the Weaver service client was closed", async () => {
      for (const modelId of this.models.keys()) {
        await this.remote.http
          .request({
            method: "POST",
            path: `/api/v1/models/${encodeURIComponent(modelId)}/terminate`,
            body: { instance_types: ["trainer", "inference"] },
            retry: "unsent",
          })
          .catch((error: unknown) =>
            this.options.log?.(
              `nexrl: could not terminate Weaver model ${modelId}: ${error instanceof Error ? error.message : String(error)}`,
            ),
          );
      }
      this.models.clear();
    });
  }

  private async open(): Promise<OpenedSession<WeaverContext>> {
    const { http, closed } = this.remote;
    const { body } = await http.request({
      method: "POST",
      path: "/api/v1/sessions",
      body: { tags: ["nexrl"], user_metadata: {}, sdk_version: SDK_VERSION },
      retry: "unsent",
    });
    const sessionId = stringField(body, "id", "create session");
    const poll = { ...DEFAULT_POLL, ...this.options.poll };
    return {
      context: { http, sessionId, poll, closed, log: this.options.log },
      beat: async () => {
        await http.request({
          method: "POST",
          path: `/api/v1/sessions/${encodeURIComponent(sessionId)}/heartbeat`,
          timeoutMs: 10_000,
          retry: "none",
        });
      },
    };
  }
}
