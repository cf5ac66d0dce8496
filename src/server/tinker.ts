/**
 * The Tinker protocol (wire-protocols §1) over the local engine, in both generations: JSON
 * bodies, and protobuf `forward_backward` bodies and results (`tinker-proto.ts`). Sessions and
 * heartbeats (a session without them expires and its models are unloaded), models created and
 * unloaded through futures, training operations run strictly in `seq_id`
 * order with resubmissions deduplicated, `tinker://` checkpoints and sampler snapshots, sampling
 * sessions, `retrieve_future` long-polling, and JWTs when `pjwt_auth_enabled` is set.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import type { ForwardBackwardOutput } from "../wire/results.js";
import { adamParamsFromWire, modelInputTokens, type Datum, type ModelInput } from "../wire/wire.js";
import { sendFault, type FaultInjector, type FaultKind } from "./faults.js";
import type { CapturedRequest, RequestHandler } from "./handler.js";
import { parseBody, parseJsonBody, readBody, requestPath, sendJson } from "./io.js";
import { checkContextLength, checkSampleCount, datumInputs } from "./limits.js";
import { sampleSession, samplingOperation, type ModelStore, type SamplingSession, type ServedModel } from "./models.js";
import { injectedFailure, type InFlightOperations, runOperation, type Operation, type Outcome } from "./operations.js";
import { OperationRegistry } from "./registry.js";
import type { SessionTable } from "./sessions.js";
import type { TinkerCheckpoints } from "./tinker-checkpoints.js";
import { tinkerCredential, type JwtIssuer } from "./tinker-jwt.js";
import {
  acceptsProtobuf,
  decodeForwardBackward,
  encodeForwardBackwardOutput,
  encodeSampleResponse,
  isProtobufBody,
  protobufBodyBytes,
  sendProtobuf,
  type ResultDtype,
} from "./tinker-proto.js";
import { tinkerRequests, type TinkerEndpoint, type TinkerRequest } from "./tinker-schema.js";
import { OperationFailure, ProtocolError } from "../errors.js";

/** Options of {@link createTinkerHandler}. */
export interface TinkerHandlerOptions {
  /** Models, artifacts and samplers (shared with the other protocols). */
  store: ModelStore;
  /** Sessions and their expiry (shared with the other protocols; expiry unloads a session's models). */
  sessions: SessionTable;
  /** Fault injection. */
  faults: FaultInjector;
  /** How long `retrieve_future` holds a poll before answering `try_again`, in milliseconds. */
  longPollTimeoutMs: number;
  /** Flags answered by `client/config` on top of the defaults (e.g. smaller chunk limits). */
  clientConfig?: Record<string, unknown> | undefined;
  /** Sees every request body the protocol parses. */
  capture?: ((request: CapturedRequest) => void) | undefined;
  /** Counts the operations received until they have run (the server's close waits for them). */
  inFlight?: InFlightOperations | undefined;
  /** Element type of logprobs in protobuf results (default float32). */
  resultDtype?: ResultDtype | undefined;
  /**
   * The JWT issuer when `clientConfig` sets `pjwt_auth_enabled` (made by the server, whose API-key
   * gate also accepts its JWTs); without one, JWTs are off whatever the flag says.
   */
  jwt?: JwtIssuer | undefined;
  /** The checkpoint REST calls (training runs, checkpoints, archives); without them, those paths are not served. */
  checkpoints?: TinkerCheckpoints | undefined;
}

const PREFIX = "/api/v1/";

/** `client/config` answer: JWT auth off and the SDK's chunking limits. */
const CLIENT_CONFIG = {
  pjwt_auth_enabled: false,
  parallel_fwdbwd_chunks: true,
  fwdbwd_max_chunk_len: 1024,
  fwdbwd_max_chunk_bytes_count: 5_000_000,
};

/** Operations whose results are answered in protobuf to a poll that accepts it. */
const PROTOBUF_RESULTS: Readonly<Record<string, (value: unknown, dtype: ResultDtype) => Uint8Array>> = {
  forward: encodeForwardBackwardOutput,
  forward_backward: encodeForwardBackwardOutput,
  sample: encodeSampleResponse,
};

/** Endpoints that take the API key itself when JWTs are on: the flags, and the exchange. */
const KEY_ENDPOINTS = new Set(["client/config", "auth/token", "get_server_capabilities"]);

/** Endpoints answering with a future (`{request_id}`): `error` faults fail their operation. */
const FUTURE_ENDPOINTS = new Set<TinkerEndpoint>([
  "create_model",
  "unload_model",
  "forward",
  "forward_backward",
  "optim_step",
  "save_weights",
  "save_weights_for_sampler",
  "load_weights",
  "asample",
]);

function applicableFaults(endpoint: TinkerEndpoint): FaultKind[] {
  if (endpoint === "retrieve_future") return ["408", "410", "429", "500", "drop"];
  if (FUTURE_ENDPOINTS.has(endpoint)) return ["408", "429", "500", "error", "drop"];
  return ["408", "429", "500", "drop"];
}

function parse<E extends TinkerEndpoint>(endpoint: E, raw: unknown): TinkerRequest<E> {
  return parseBody(tinkerRequests[endpoint] as unknown as z.ZodType<TinkerRequest<E>>, endpoint, raw);
}

/** `tinker://<model_id>/<kind>/<name>`. */
function tinkerPath(modelId: string, kind: "weights" | "sampler_weights", name: string): string {
  return `tinker://${modelId}/${kind}/${name}`;
}

function lossOutputs(result: ForwardBackwardOutput): unknown {
  return {
    loss_fn_output_type: "ArrayRecord",
    loss_fn_outputs: result.lossFnOutputs.map((o) => ({
      logprobs: { data: o.logprobs, dtype: "float32", shape: [o.logprobs.length] },
    })),
    metrics: result.metrics,
  };
}

async function sample(session: SamplingSession, body: TinkerRequest<"asample">): Promise<unknown> {
  const prompt = modelInputTokens(body.prompt);
  const promptLogprobs = body.prompt_logprobs ? { prompt_logprobs: await session.sampler.computeLogprobs(prompt) } : {};
  if (prompt.length >= session.contextLength) {
    // A prompt that fills the context leaves nothing to generate, but can still be scored.
    const empty = Array.from({ length: body.num_samples }, () => ({ stop_reason: "length", tokens: [], logprobs: [] }));
    return { type: "sample", sequences: empty, ...promptLogprobs };
  }
  const result = await sampleSession(session, prompt, body.sampling_params, body.num_samples);
  return {
    type: "sample",
    sequences: result.sequences.map((s) => ({ stop_reason: s.stopReason, tokens: s.tokens, logprobs: s.logprobs })),
    ...promptLogprobs,
  };
}

/** The endpoints answered by a handler of {@link CALLS}: every POST endpoint but `retrieve_future`. */
type CallEndpoint = Exclude<TinkerEndpoint, "retrieve_future">;

/** What the handlers of one Tinker handler share. */
interface TinkerContext {
  readonly options: TinkerHandlerOptions;
  readonly store: ModelStore;
  readonly sessions: SessionTable;
  /** The futures handed out, polled with `retrieve_future`. */
  readonly promises: OperationRegistry;
  /** `create_model`'s operations by model id (which starts with its session's id): a resubmission gets the same one. */
  readonly createdModels: Map<string, Operation>;
  /** The sampling sessions opened, by id (which starts with its session's id). */
  readonly samplingSessions: Set<string>;
  /** What `client/config` answers. */
  readonly clientConfig: Record<string, unknown>;
}

/** How a call came: `failed`, an `error` fault fails the operation it submits; `forwardOnly`, a protobuf forward_backward's flag. */
interface CallMode {
  readonly failed: boolean;
  readonly forwardOnly: boolean;
}

/** Answers one endpoint's parsed body. */
type CallHandler<E extends CallEndpoint> = (ctx: TinkerContext, body: TinkerRequest<E>, mode: CallMode) => unknown;

/** `op` as a future (`{request_id}`, with the model's id when it has one). */
function future(ctx: TinkerContext, op: Operation, modelId?: string): unknown {
  return { request_id: ctx.promises.register(op), ...(modelId !== undefined && { model_id: modelId }) };
}

/** The live session `id`. */
function liveSession(ctx: TinkerContext, id: string): string {
  return ctx.sessions.check(id, "call create_session first");
}

/** Submits `run` on model `modelId`'s queue at `seq` (an injected failure when `failed`) and answers its future. */
function seqOp(
  ctx: TinkerContext,
  modelId: string,
  seq: number,
  kind: string,
  failed: boolean,
  run: (model: ServedModel) => unknown,
): unknown {
  const model = ctx.store.model(modelId);
  ctx.options.checkpoints?.touch(modelId);
  return future(
    ctx,
    ctx.sessions.track(model.owner, model.queue.submit(seq, kind, failed ? injectedFailure : () => run(model))),
    modelId,
  );
}

function createModel(ctx: TinkerContext, body: TinkerRequest<"create_model">, { failed }: CallMode): unknown {
  const key = `${liveSession(ctx, body.session_id)}:train:${body.model_seq_id}`;
  let op = ctx.createdModels.get(key);
  if (!op) {
    // Made before answering, so that an unknown base model (400) or a full memory budget (503) is the answer's status.
    if (!failed) {
      const model = ctx.store.createModel({
        id: key,
        baseModel: body.base_model,
        owner: body.session_id,
        trainingMode: "lora",
        loraRank: body.lora_config?.rank ?? 32,
        ...(body.lora_config?.seed !== undefined && { seed: body.lora_config.seed }),
      });
      ctx.options.checkpoints?.recordRun(model);
    }
    op = runOperation("create_model", failed ? injectedFailure : () => ({ model_id: key, type: "create_model" }));
    ctx.createdModels.set(key, op);
  }
  return future(ctx, op, key);
}

function getInfo(ctx: TinkerContext, body: TinkerRequest<"get_info">): unknown {
  const model = ctx.store.model(body.model_id);
  return {
    type: "get_info",
    model_id: model.id,
    model_data: { arch: "nexrl-local-transformer", model_name: model.baseModel, tokenizer_id: "byte" },
    is_lora: true,
    lora_rank: model.loraRank,
    model_name: model.baseModel,
  };
}

function unloadModel(ctx: TinkerContext, body: TinkerRequest<"unload_model">, { failed }: CallMode): unknown {
  const model = ctx.store.model(body.model_id);
  ctx.sessions.refresh(model.owner);
  if (!failed) {
    ctx.store.removeModel(model.id, { code: "model_unloaded", reason: "a client unloaded it (unload_model)" });
    ctx.createdModels.delete(model.id);
  }
  const unloaded = { model_id: model.id, type: "unload_model" };
  return future(ctx, runOperation("unload_model", failed ? injectedFailure : () => unloaded), model.id);
}

/** What the SDK's create_training_client_from_state needs to recreate the model. */
function weightsInfo(ctx: TinkerContext, body: TinkerRequest<"weights_info">): unknown {
  const artifact = ctx.store.artifact(body.tinker_path);
  return {
    base_model: artifact.baseModel,
    is_lora: true,
    lora_rank: artifact.loraRank ?? 32,
    train_unembed: true,
    train_mlp: true,
    train_attn: true,
  };
}

/** `forward`, and `forward_backward` (the protobuf generation's forward: forward_backward with forward_only). */
function lossPass(
  ctx: TinkerContext,
  body: TinkerRequest<"forward" | "forward_backward">,
  { failed, forwardOnly }: CallMode,
): unknown {
  const input = "forward_input" in body ? body.forward_input : body.forward_backward_input;
  const datums = input.data as Datum[];
  checkContextLength(datumInputs(datums), ctx.store.model(body.model_id).engine.config.contextLength);
  const backward = "forward_backward_input" in body && !forwardOnly;
  return seqOp(ctx, body.model_id, body.seq_id, backward ? "forward_backward" : "forward", failed, async (m) =>
    lossOutputs(
      await (backward
        ? m.engine.forwardBackward(datums, input.loss_fn, input.loss_fn_config)
        : m.engine.forward(datums, input.loss_fn, input.loss_fn_config)),
    ),
  );
}

function optimStep(ctx: TinkerContext, body: TinkerRequest<"optim_step">, { failed }: CallMode): unknown {
  return seqOp(ctx, body.model_id, body.seq_id, "optim_step", failed, async (m) => ({
    metrics: (await m.engine.optimStep(adamParamsFromWire(body.adam_params))).metrics,
  }));
}

function saveWeights(ctx: TinkerContext, body: TinkerRequest<"save_weights">, { failed }: CallMode): unknown {
  return seqOp(ctx, body.model_id, body.seq_id, "save_weights", failed, async (m) => {
    const path = tinkerPath(m.id, "weights", body.path);
    if (body.overwrite !== true && ctx.store.hasArtifact(path)) {
      throw new OperationFailure(
        `checkpoint ${path} exists and overwrite is false; save under a new name or pass overwrite: true`,
        { category: "user" },
      );
    }
    ctx.store.addArtifact(m, path, await m.engine.saveState(body.path, { optimizer: true }), body.ttl_seconds);
    return { path, type: "save_weights" };
  });
}

function saveWeightsForSampler(
  ctx: TinkerContext,
  body: TinkerRequest<"save_weights_for_sampler">,
  { failed }: CallMode,
): unknown {
  return seqOp(ctx, body.model_id, body.seq_id, "save_weights_for_sampler", failed, async (m) => {
    // Without a path, the snapshot backs a new sampling session of the model's session,
    // numbered like create_sampling_session's (the SDK counts both with one counter).
    const seq = body.sampling_session_seq_id;
    const name = body.path ?? `sampling_session_${seq}`;
    const path = tinkerPath(m.id, "sampler_weights", name);
    ctx.store.addArtifact(m, path, await m.engine.saveWeightsForSampler(name), body.ttl_seconds);
    if (body.path !== undefined) return { path, type: "save_weights_for_sampler" };
    const key = `${m.id.slice(0, m.id.lastIndexOf(":train:"))}:sample:${seq}`;
    await ctx.store.openSampler(key, { modelPath: path }, m.owner);
    ctx.samplingSessions.add(key);
    return { sampling_session_id: key, type: "save_weights_for_sampler" };
  });
}

function loadWeights(ctx: TinkerContext, body: TinkerRequest<"load_weights">, { failed }: CallMode): unknown {
  return seqOp(ctx, body.model_id, body.seq_id, "load_weights", failed, async (m) => {
    await m.engine.loadState(ctx.store.artifact(body.path).file, { optimizer: body.optimizer });
    return { path: body.path, type: "load_weights" };
  });
}

async function createSamplingSession(
  ctx: TinkerContext,
  body: TinkerRequest<"create_sampling_session">,
): Promise<unknown> {
  const key = `${liveSession(ctx, body.session_id)}:sample:${body.sampling_session_seq_id}`;
  if (!ctx.samplingSessions.has(key)) {
    if (body.model_path !== undefined && !body.model_path.startsWith("tinker://")) {
      throw new ProtocolError(`model_path must start with tinker://, got ${body.model_path}`, {
        status: 400,
        code: "invalid_model_path",
      });
    }
    await ctx.store.openSampler(key, { modelPath: body.model_path, baseModel: body.base_model }, body.session_id);
    ctx.samplingSessions.add(key);
  }
  return { type: "create_sampling_session", sampling_session_id: key };
}

function asample(ctx: TinkerContext, body: TinkerRequest<"asample">, { failed }: CallMode): unknown {
  const target = ctx.store.samplingSession(body.sampling_session_id);
  checkSampleCount(body.num_samples, "num_samples");
  checkContextLength([{ what: "the prompt", input: body.prompt as ModelInput }], target.contextLength);
  const op = samplingOperation(target, "sample", failed ? injectedFailure : () => sample(target, body));
  return future(ctx, ctx.sessions.track(target.owner, op));
}

/** The handler of each POST endpoint but `retrieve_future` (see {@link poll}). */
const CALLS: { readonly [E in CallEndpoint]: CallHandler<E> } = {
  "client/config": (ctx) => ctx.clientConfig,
  "auth/token": (ctx) => ({ jwt: ctx.options.jwt!.issue() }),
  telemetry: () => ({ status: "accepted" }),
  create_session: (ctx) => ({ type: "create_session", session_id: ctx.sessions.create() }),
  session_heartbeat: (ctx, body) => {
    liveSession(ctx, body.session_id);
    return { type: "session_heartbeat" };
  },
  create_model: createModel,
  get_info: getInfo,
  unload_model: unloadModel,
  weights_info: weightsInfo,
  forward: lossPass,
  forward_backward: lossPass,
  optim_step: optimStep,
  save_weights: saveWeights,
  save_weights_for_sampler: saveWeightsForSampler,
  load_weights: loadWeights,
  create_sampling_session: createSamplingSession,
  asample,
};

/** Parses `raw` as `endpoint`'s body and answers it with the endpoint's handler. */
function answerCall<E extends CallEndpoint>(ctx: TinkerContext, endpoint: E, raw: unknown, mode: CallMode): unknown {
  const handler: CallHandler<E> = CALLS[endpoint];
  return handler(ctx, parse(endpoint, raw), mode);
}

/** The `get_server_capabilities` answer: the models served, with their context lengths. */
function capabilities(ctx: TinkerContext): unknown {
  return {
    supported_models: ctx.store.presets().map((p) => ({ model_name: p.name, max_context_length: p.contextLength })),
  };
}

/**
 * `retrieve_future`: the outcome of the polled operation (protobuf where it has a protobuf form
 * and the poll accepts it), `try_again` after the long poll, 410 for an unknown or forgotten
 * request id. A status `fault` answers instead (`410` forgets the promise first).
 */
async function poll(
  ctx: TinkerContext,
  req: IncomingMessage,
  res: ServerResponse,
  body: TinkerRequest<"retrieve_future">,
  fault: FaultKind | undefined,
): Promise<void> {
  const { request_id: requestId } = body;
  if (fault === "410") ctx.promises.forget(requestId);
  if (fault && fault !== "error") {
    sendFault(
      res,
      fault,
      fault === "408" ? { type: "try_again", request_id: requestId, queue_state: "active" } : { request_id: requestId },
    );
    return;
  }
  const op = ctx.promises.get(requestId);
  if (!op) {
    sendJson(res, 410, {
      error: "promise_expired",
      message: `request ${requestId} is unknown or expired; resubmit the original request`,
    });
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ctx.options.longPollTimeoutMs);
    timer.unref();
  });
  const outcome: Outcome | undefined = await Promise.race([op.done, timeout]);
  clearTimeout(timer);
  const encode = PROTOBUF_RESULTS[op.kind];
  if (!outcome) sendJson(res, 200, { type: "try_again", request_id: requestId, queue_state: "active" });
  else if (!outcome.ok) sendJson(res, 200, { error: outcome.message, category: outcome.category });
  else if (acceptsProtobuf(req.headers) && encode)
    sendProtobuf(res, encode(outcome.value, ctx.options.resultDtype ?? "float32"));
  else sendJson(res, 200, outcome.value);
}

/** The routes, `<method> <endpoint>` (the path after `/api/v1/`): every endpoint of the schema is a POST. */
const ROUTES = new Map<string, TinkerEndpoint | "get_server_capabilities">([
  ["GET get_server_capabilities", "get_server_capabilities"],
  ...Object.keys(tinkerRequests).map((endpoint): [string, TinkerEndpoint] => [
    `POST ${endpoint}`,
    endpoint as TinkerEndpoint,
  ]),
]);

/**
 * With JWTs on, checks that every endpoint but the flags and the exchange carries a valid JWT.
 * (The API key, when the server has one, is checked before this handler by the server's gate.)
 * @throws {@link ProtocolError} 401.
 */
function authorize(jwt: JwtIssuer | undefined, req: IncomingMessage, endpoint: string): void {
  if (jwt && !KEY_ENDPOINTS.has(endpoint)) {
    const check = jwt.verify(tinkerCredential(req));
    if (check !== "valid")
      throw new ProtocolError(
        check === "expired"
          ? "Invalid JWT: it has expired; exchange the API key for a new one at /api/v1/auth/token"
          : "Invalid JWT: this server exchanges API keys for JWTs (pjwt_auth_enabled); send the JWT from /api/v1/auth/token in X-API-Key",
        { status: 401, code: "invalid_jwt" },
      );
  }
}

/** The body in the JSON shape (a protobuf forward_backward read into it), what the capture sees, and forward_only. */
async function readRequest(
  req: IncomingMessage,
  endpoint: string,
): Promise<{ raw: unknown; captured: unknown; rawBody?: Uint8Array; forwardOnly: boolean }> {
  const bytes = await readBody(req);
  if (!isProtobufBody(req.headers)) return { raw: parseJsonBody(bytes), captured: undefined, forwardOnly: false };
  if (endpoint !== "forward_backward")
    throw new ProtocolError(
      `${endpoint} takes a JSON body; only forward_backward may be sent as application/x-protobuf`,
      { status: 415, code: "unsupported_media_type" },
    );
  const { body, forwardOnly } = decodeForwardBackward(await protobufBodyBytes(bytes, req.headers));
  return { raw: body, captured: { ...body, forward_only: forwardOnly }, rawBody: bytes, forwardOnly };
}

/**
 * The Tinker protocol under `/api/v1/`. Faults apply as documented on {@link FaultKind}: status
 * faults answer before the request is handled; `drop` closes the connection after a request was
 * handled (so a resubmission must be deduplicated), or instead of a poll; `410` forgets the
 * polled promise; `error` fails the submitted operation without applying it.
 */
export function createTinkerHandler(options: TinkerHandlerOptions): RequestHandler {
  const { faults, sessions, jwt } = options;
  const ctx: TinkerContext = {
    options,
    store: options.store,
    sessions,
    promises: new OperationRegistry(options.inFlight),
    createdModels: new Map(),
    samplingSessions: new Set(),
    clientConfig: { ...CLIENT_CONFIG, ...options.clientConfig },
  };
  sessions.onExpire((id) => {
    for (const key of ctx.createdModels.keys()) if (key.startsWith(`${id}:`)) ctx.createdModels.delete(key);
    for (const key of ctx.samplingSessions) if (key.startsWith(`${id}:`)) ctx.samplingSessions.delete(key);
  });

  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = requestPath(req);
    if (!path.startsWith(PREFIX)) return false;
    const endpoint = path.slice(PREFIX.length);
    if (options.checkpoints && /^(training_runs|checkpoints)(\/|$)/.test(endpoint)) {
      authorize(jwt, req, endpoint);
      return options.checkpoints.handle(req, res);
    }
    const route = ROUTES.get(`${req.method} ${endpoint}`);
    // Unknown here: another handler may take it, else 404. The JWT exchange exists only when JWTs are on, as on a Tinker server.
    if (!route || (route === "auth/token" && !jwt)) return false;
    authorize(jwt, req, endpoint);
    const capture = (body: unknown, rawBody?: Uint8Array): void =>
      options.capture?.({
        protocol: "tinker",
        method: req.method ?? "",
        path,
        headers: req.headers,
        body,
        ...(rawBody && { rawBody }),
      });
    if (route === "get_server_capabilities") {
      capture({});
      sendJson(res, 200, capabilities(ctx));
      return true;
    }
    const { raw, captured, rawBody, forwardOnly } = await readRequest(req, endpoint);
    capture(captured ?? raw, rawBody);
    const fault = faults.draw(applicableFaults(route));
    if (route === "retrieve_future") {
      await poll(ctx, req, res, parse(route, raw), fault);
      return true;
    }
    if (fault && fault !== "error" && fault !== "drop") {
      sendFault(res, fault);
      return true;
    }
    const answer = await answerCall(ctx, route, raw, { failed: fault === "error", forwardOnly });
    if (fault === "drop") sendFault(res, "drop");
    else sendJson(res, 200, answer);
    return true;
  };
}
