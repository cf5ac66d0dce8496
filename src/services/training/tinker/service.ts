/**
 * {@link TinkerTrainingService}: a Tinker-protocol service (Thinking Machines' Tinker, or a
 * compatible server such as `nexrl serve`) as a {@link TrainingService}.
 *
 * @module
 */
import { DEFAULT_BACKOFF, type BackoffOptions } from "../../../http/backoff.js";
import { resolveEndpoint, type EndpointOptions } from "../../../http/endpoint.js";
import { Heartbeat } from "../../../http/heartbeat.js";
import { HttpTransport } from "../../../http/transport.js";
import type { CreateTrainingClientOptions, SamplingClient, TrainingClient, TrainingService } from "../types.js";
import { BillingPause } from "./billing.js";
import { submitRequest, tinkerRequester, type TinkerContext } from "./context.js";
import { UnsupportedTrainingModeError } from "./errors.js";
import { TinkerFuture } from "./future.js";
import { announcedSdkVersion, negotiate, resolveWire, type TinkerNegotiation, type TinkerWire } from "./generation.js";
import { JwtCredential } from "./jwt.js";
import { TinkerSamplingClient } from "./sampling-client.js";
import { TinkerTrainingClient } from "./training-client.js";
import { TinkerResponseError } from "./wire.js";

/** Thinking Machines' production endpoint. */
export const TINKER_DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod";

/** Options of {@link TinkerTrainingService}; each falls back to the environment. */
export interface TinkerServiceOptions extends EndpointOptions {
  /** Timeout of each HTTP call in milliseconds (60 000). */
  timeoutMs?: number;
  /** Timeout of each `retrieve_future` long poll in milliseconds (45 000). */
  pollTimeoutMs?: number;
  /** Most retries of a failed call, and most failed polls in a row (10). */
  maxRetries?: number;
  /** Backoff between retries (0.5 s doubling to 10 s, jittered). */
  backoff?: Partial<BackoffOptions>;
  /** Milliseconds between session heartbeats (10 000). */
  heartbeatIntervalMs?: number;
  /** Session tags; default: `TINKER_TAGS` (comma-separated), else none. */
  tags?: string[];
  /** Receives retry and heartbeat warnings, API key redacted (default: none). */
  log?: (line: string) => void;
  /**
   * Which generation of the protocol to speak (see `generation.ts`): `auto` lets the server
   * choose through its `client/config` flags, `json` and `protobuf` force one. Default:
   * `NEXRL_TINKER_WIRE`, else `auto`.
   */
  wire?: TinkerWire;
  /** Wait between retries of a call the service answered 402 (billing), in milliseconds (5000, as the SDK). */
  billingRetryMs?: number;
  /** The clock JWT expiry and billing pauses are measured with, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
}

interface Connection {
  ctx: TinkerContext;
  heartbeat: Heartbeat;
  jwt: JwtCredential | undefined;
}

/**
 * A Tinker service: `TINKER_API_KEY` (sent as `X-API-Key`) and `TINKER_BASE_URL`, or the options.
 * `connect()` reads `client/config`, creates a session and starts heartbeats every 10 s (which
 * never keep the process alive); `close()` stops them and aborts polls in flight.
 *
 * Tinker trains LoRA adapters; `trainingMode: "full_ft"` is refused.
 *
 * @example
 * ```ts
 * const service = new TinkerTrainingService({ baseUrl: "http://127.0.0.1:8000", apiKey: "tml-local" });
 * const client = await service.createTrainingClient({ baseModel: "tiny", loraRank: 8 });
 * const fb = await client.forwardBackward(datums, "cross_entropy");
 * const step = await client.optimStep(adamParams({ learning_rate: 1e-3 }));
 * console.log((await fb.result()).metrics["loss:sum"], await step.result());
 * await service.close();
 * ```
 */
export class TinkerTrainingService implements TrainingService {
  /** Always `tinker`. */
  readonly backend = "tinker" as const;
  private readonly http: HttpTransport;
  private readonly wire: TinkerWire;
  private readonly closing = new AbortController();
  private connection: Promise<Connection> | undefined;
  private nextModelSeq = 0;
  private nextSamplerSeq = 0;

  /**
   * @param options key, base URL, timeouts and retries.
   * @throws MissingApiKeyError when neither `apiKey` nor `TINKER_API_KEY` is set;
   * TinkerWireError for an unknown `wire` / `NEXRL_TINKER_WIRE`.
   */
  constructor(private readonly options: TinkerServiceOptions = {}) {
    this.wire = resolveWire(options.wire, options.env ?? process.env);
    const { apiKey, baseUrl } = resolveEndpoint(options, {
      service: "Tinker",
      keyVar: "TINKER_API_KEY",
      urlVar: "TINKER_BASE_URL",
      defaultUrl: TINKER_DEFAULT_BASE_URL,
    });
    this.http = new HttpTransport({
      baseUrl,
      apiKey,
      apiKeyHeader: "X-API-Key",
      apiKeySource: "TINKER_API_KEY",
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      ...(options.maxRetries !== undefined && { maxRetries: options.maxRetries }),
      ...(options.backoff && { backoff: options.backoff }),
      ...(options.log && { log: options.log }),
    });
  }

  /** Reads `client/config`, creates the session and starts heartbeats (once; a failed attempt can be repeated). */
  async connect(): Promise<void> {
    await this.connected();
  }

  /** What was agreed with the server (connecting first): wire generation, `sdk_version`, JWT and flags. */
  async negotiated(): Promise<TinkerNegotiation> {
    return (await this.connected()).ctx.negotiation;
  }

  /** Creates a LoRA model (`create_model`, a future) and returns its training client. */
  async createTrainingClient(options: CreateTrainingClientOptions): Promise<TrainingClient> {
    if (options.trainingMode === "full_ft") {
      throw new UnsupportedTrainingModeError(
        'Tinker trains LoRA adapters only; use trainingMode "lora", or the weaver or local backend for full fine-tuning',
      );
    }
    const { ctx } = await this.connected();
    const body = {
      session_id: ctx.sessionId,
      model_seq_id: this.nextModelSeq++,
      base_model: options.baseModel,
      lora_config: {
        rank: options.loraRank ?? 32,
        ...(options.seed !== undefined && { seed: options.seed }),
        train_unembed: true,
        train_mlp: true,
        train_attn: true,
      },
      type: "create_model",
    };
    const send = (): Promise<string> => submitRequest(ctx, "create_model", { body }, "CreateModel");
    const future = new TinkerFuture(
      ctx,
      await send(),
      send,
      (answer) => (answer as { model_id?: unknown }).model_id,
      `create_model (${options.baseModel})`,
    );
    const modelId = await future.result();
    if (typeof modelId !== "string") throw new TinkerResponseError("create_model answered without a model_id");
    return new TinkerTrainingClient(ctx, modelId, options.baseModel);
  }

  /** Opens a sampling session on a `tinker://` sampler path, or on a base model by name. */
  async createSamplingClient(path: string): Promise<SamplingClient> {
    const { ctx } = await this.connected();
    const { body } = await ctx.request<{ sampling_session_id?: unknown }>({
      method: "POST",
      path: "/api/v1/create_sampling_session",
      body: {
        session_id: ctx.sessionId,
        sampling_session_seq_id: this.nextSamplerSeq++,
        ...(path.startsWith("tinker://") ? { model_path: path } : { base_model: path }),
        type: "create_sampling_session",
      },
      retry: "all",
      idempotencyKey: true,
    });
    if (typeof body.sampling_session_id !== "string")
      throw new TinkerResponseError("create_sampling_session answered without a sampling_session_id");
    return new TinkerSamplingClient(ctx, path, body.sampling_session_id);
  }

  /** Stops heartbeats, aborts polls in flight and releases connections. */
  async close(): Promise<void> {
    this.closing.abort(new Error("the Tinker service client was closed"));
    const connection = await this.connection?.catch(() => undefined);
    connection?.heartbeat.stop();
    connection?.jwt?.stop();
    await this.http.close();
  }

  private connected(): Promise<Connection> {
    this.connection ??= this.open().catch((error: unknown) => {
      this.connection = undefined;
      throw error;
    });
    return this.connection;
  }

  private async open(): Promise<Connection> {
    const { body: config } = await this.http.request<Record<string, unknown>>({
      method: "POST",
      path: "/api/v1/client/config",
      body: { sdk_version: announcedSdkVersion(this.wire) },
      retry: "all",
    });
    const negotiation = negotiate(this.wire, config && typeof config === "object" ? config : {});
    const { flags } = negotiation;
    let jwt: JwtCredential | undefined;
    if (flags.pjwt_auth_enabled) {
      jwt = new JwtCredential({
        exchange: async () => {
          const { body } = await this.http.request<{ jwt?: unknown }>({
            method: "POST",
            path: "/api/v1/auth/token",
            body: {},
            retry: "all",
          });
          if (typeof body?.jwt !== "string")
            throw new TinkerResponseError("POST /api/v1/auth/token answered without a jwt");
          return body.jwt;
        },
        log: this.options.log,
        ...(this.options.now && { now: this.options.now }),
      });
      await jwt.start();
    }
    const request = tinkerRequester({
      http: this.http,
      jwt,
      billing: new BillingPause(flags.billing_exception_max_pause_duration_sec * 1000, this.options.now),
      billingRetryMs: this.options.billingRetryMs ?? 5000,
      closed: this.closing.signal,
      log: this.options.log,
    });
    const tags =
      this.options.tags ??
      (this.options.env ?? process.env).TINKER_TAGS?.split(",")
        .map((t) => t.trim())
        .filter((t) => t !== "") ??
      [];
    let session: { session_id?: unknown };
    try {
      ({ body: session } = await request<{ session_id?: unknown }>({
        method: "POST",
        path: "/api/v1/create_session",
        body: { tags, user_metadata: {}, sdk_version: negotiation.sdkVersion, type: "create_session" },
        retry: "all",
        idempotencyKey: true,
      }));
    } catch (error) {
      jwt?.stop();
      throw error;
    }
    if (typeof session.session_id !== "string") {
      jwt?.stop();
      throw new TinkerResponseError("create_session answered without a session_id");
    }
    const sessionId = session.session_id;
    const ctx: TinkerContext = {
      http: this.http,
      sessionId,
      negotiation,
      limits: { maxDatums: flags.fwdbwd_max_chunk_len, maxBytes: flags.fwdbwd_max_chunk_bytes_count },
      pollTimeoutMs: this.options.pollTimeoutMs ?? 45_000,
      maxRetries: this.options.maxRetries ?? 10,
      backoff: { ...DEFAULT_BACKOFF, ...this.options.backoff },
      closed: this.closing.signal,
      log: this.options.log,
      request,
    };
    const heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatIntervalMs ?? 10_000,
      label: `Tinker session ${sessionId}`,
      ...(this.options.log && { log: this.options.log }),
      beat: async () => {
        await request(
          {
            method: "POST",
            path: "/api/v1/session_heartbeat",
            body: { session_id: sessionId, type: "session_heartbeat" },
            timeoutMs: 10_000,
            retry: "none",
          },
          { billingPause: false },
        );
      },
    });
    return { ctx, heartbeat, jwt };
  }
}
