/**
 * {@link TinkerTrainingService}: a Tinker-protocol service (Thinking Machines' Tinker, or a
 * compatible server such as `nexrl serve`) as a {@link TrainingService}.
 *
 * @module
 */
import { DEFAULT_BACKOFF } from "../../http/backoff.js";
import { RemoteSession, type OpenedSession, type RemoteServiceOptions } from "../remote/session.js";
import type {
  CreateTrainingClientOptions,
  SamplingClient,
  TrainingClient,
  TrainingService,
} from "../../contracts/training.js";
import { BillingPause } from "./billing.js";
import { submitRequest, tinkerRequester, type TinkerContext } from "./context.js";
import { TinkerFuture } from "./future.js";
import { announcedSdkVersion, negotiate, resolveWire, type TinkerNegotiation, type TinkerWire } from "./generation.js";
import { JwtCredential } from "./jwt.js";
import { TinkerRestClient } from "./rest.js";
import { TinkerSamplingClient } from "./sampling-client.js";
import { TinkerTrainingClient } from "./training-client.js";
import { ConfigError, UnexpectedResponseError } from "../../errors.js";

/** Thinking Machines' production endpoint. */
export const TINKER_DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod";

/** Options of {@link TinkerTrainingService}; the key and URL fall back to `TINKER_API_KEY` and `TINKER_BASE_URL`. */
export interface TinkerServiceOptions extends RemoteServiceOptions {
  /** Timeout of each `retrieve_future` long poll in milliseconds (45 000). */
  pollTimeoutMs?: number;
  /** Session tags; default: `TINKER_TAGS` (comma-separated), else none. */
  tags?: string[];
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
 * const step = await client.optimStep(adamParams({ learningRate: 1e-3 }));
 * console.log((await fb.result()).metrics["loss:sum"], await step.result());
 * await service.close();
 * ```
 */
export class TinkerTrainingService implements TrainingService {
  /** Always `tinker`. */
  readonly backend = "tinker" as const;
  private readonly remote: RemoteSession<TinkerContext>;
  private readonly wire: TinkerWire;
  private nextModelSeq = 0;
  private nextSamplerSeq = 0;

  /**
   * @param options key, base URL, timeouts and retries.
   * @throws ConfigError when neither `apiKey` nor `TINKER_API_KEY` is set, or for an unknown
   * `wire` / `NEXRL_TINKER_WIRE`.
   */
  constructor(private readonly options: TinkerServiceOptions = {}) {
    this.wire = resolveWire(options.wire, options.env ?? process.env);
    this.remote = new RemoteSession(
      { service: "Tinker", keyHeader: "X-API-Key", defaultUrl: TINKER_DEFAULT_BASE_URL, heartbeatIntervalMs: 10_000 },
      options,
      () => this.open(),
    );
  }

  /** Reads `client/config`, creates the session and starts heartbeats (once; a failed attempt can be repeated). */
  async connect(): Promise<void> {
    await this.remote.context();
  }

  /** What was agreed with the server (connecting first): wire generation, `sdk_version`, JWT and flags. */
  async negotiated(): Promise<TinkerNegotiation> {
    return (await this.remote.context()).negotiation;
  }

  /** Creates a LoRA model (`create_model`, a future) and returns its training client. */
  async createTrainingClient(options: CreateTrainingClientOptions): Promise<TrainingClient> {
    if (options.trainingMode === "full_ft") {
      throw new ConfigError(
        'Tinker trains LoRA adapters only; use trainingMode "lora", or the weaver or local backend for full fine-tuning',
      );
    }
    const ctx = await this.remote.context();
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
    if (typeof modelId !== "string") throw new UnexpectedResponseError("create_model answered without a model_id");
    return new TinkerTrainingClient(ctx, modelId, options.baseModel);
  }

  /** Opens a sampling session on a `tinker://` sampler path, or on a base model by name. */
  async createSamplingClient(path: string): Promise<SamplingClient> {
    const ctx = await this.remote.context();
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
      throw new UnexpectedResponseError("create_sampling_session answered without a sampling_session_id");
    return new TinkerSamplingClient(ctx, path, body.sampling_session_id);
  }

  /** The checkpoint calls (training runs, checkpoints, archives, delete, publish, TTL) on this connection, connecting first. */
  async rest(): Promise<TinkerRestClient> {
    return new TinkerRestClient(await this.remote.context());
  }

  /** Stops heartbeats, aborts polls in flight and releases connections. */
  async close(): Promise<void> {
    await this.remote.close("the Tinker service client was closed");
  }

  private async open(): Promise<OpenedSession<TinkerContext>> {
    const { http, closed } = this.remote;
    const { body: config } = await http.request<Record<string, unknown>>({
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
          const { body } = await http.request<{ jwt?: unknown }>({
            method: "POST",
            path: "/api/v1/auth/token",
            body: {},
            retry: "all",
          });
          if (typeof body?.jwt !== "string")
            throw new UnexpectedResponseError("POST /api/v1/auth/token answered without a jwt");
          return body.jwt;
        },
        log: this.options.log,
        ...(this.options.now && { now: this.options.now }),
      });
      await jwt.start();
    }
    const request = tinkerRequester({
      http,
      jwt,
      billing: new BillingPause(flags.billing_exception_max_pause_duration_sec * 1000, this.options.now),
      billingRetryMs: this.options.billingRetryMs ?? 5000,
      closed,
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
      throw new UnexpectedResponseError("create_session answered without a session_id");
    }
    const context: TinkerContext = {
      http,
      sessionId: session.session_id,
      negotiation,
      limits: { maxDatums: flags.fwdbwd_max_chunk_len, maxBytes: flags.fwdbwd_max_chunk_bytes_count },
      pollTimeoutMs: this.options.pollTimeoutMs ?? 45_000,
      maxRetries: this.options.maxRetries ?? 10,
      backoff: { ...DEFAULT_BACKOFF, ...this.options.backoff },
      closed,
      log: this.options.log,
      request,
    };
    return {
      context,
      beat: async () => {
        await request(
          {
            method: "POST",
            path: "/api/v1/session_heartbeat",
            body: { session_id: context.sessionId, type: "session_heartbeat" },
            timeoutMs: 10_000,
            retry: "none",
          },
          { billingPause: false },
        );
      },
      stop: () => jwt?.stop(),
    };
  }
}
