/**
 * The Weaver protocol (wire-protocols §3) over the local engine: sessions and heartbeats, models
 * created with a `training_mode`, operations polled with `GET /operations/{id}`, nested-list
 * tensors, `loss_mask` for `importance_sampling`, checkpoints of type `weight`,
 * `weight_and_optimizer` and `sampling`, sampler exports with a TTL, sampling sessions, and
 * pause / continue generation for `full_ft` models.
 *
 * Like real deployments, some answers use camelCase or PascalCase field names (`modelPath`,
 * `stopReason`, `Logprobs`), so clients must read fields case-insensitively.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { validateLossInputs } from "../contracts/loss-validation.js";
import { adamParamsFromWire, modelInputTokens, tensorValues, type Datum, type TensorData } from "../wire/wire.js";
import { sendFault, type FaultInjector, type FaultKind } from "./faults.js";
import type { CapturedRequest, RequestHandler } from "./handler.js";
import { parseBody, readJson, requestPath, sendJson } from "./io.js";
import { checkContextLength, checkSampleCount, datumInputs } from "./limits.js";
import { sampleSession, samplingOperation, type ModelStore, type SamplingSession, type ServedModel } from "./models.js";
import { injectedFailure, type InFlightOperations, runOperation, type Operation } from "./operations.js";
import { OperationRegistry } from "./registry.js";
import type { SessionTable } from "./sessions.js";
import { decodePathSegment } from "./url-path.js";
import { flatDatum, weaverRequests, type WeaverRequest, type WeaverRoute } from "./weaver-schema.js";
import { ProtocolError } from "../errors.js";

/** Options of {@link createWeaverHandler}. */
export interface WeaverHandlerOptions {
  /** Models, artifacts and samplers (shared with the other protocols). */
  store: ModelStore;
  /** Sessions and their expiry (shared with the other protocols; expiry unloads a session's models). */
  sessions: SessionTable;
  /** Fault injection. */
  faults: FaultInjector;
  /** Sees every request body the protocol parses. */
  capture?: ((request: CapturedRequest) => void) | undefined;
  /** Counts the operations received until they have run (the server's close waits for them). */
  inFlight?: InFlightOperations | undefined;
}

/** Default TTL of sampler exports, in seconds (Weaver's `DEFAULT_SAMPLER_TTL_SECONDS`). */
const SAMPLER_TTL_SECONDS = 3600;

/** `loss_fn_config` keys Weaver clients send that the local engine has no use for. */
const IGNORED_CONFIG = new Set(["entropy_coeff", "enable_debug_dump"]);

function parse<R extends WeaverRoute>(route: R, raw: unknown): WeaverRequest<R> {
  return parseBody(weaverRequests[route] as unknown as z.ZodType<WeaverRequest<R>>, route, raw);
}

/** The engine's datum: `loss_mask` folded into the advantages or weights, then dropped. */
function engineDatum(datum: Datum): Datum {
  const { loss_mask: mask, ...inputs } = datum.loss_fn_inputs;
  if (!mask) return datum;
  const keep = tensorValues(mask);
  for (const key of ["advantages", "weights"]) {
    const tensor = inputs[key];
    if (tensor)
      inputs[key] = {
        data: tensorValues(tensor).map((v, i) => v * keep[i]!),
        dtype: tensor.dtype,
        ...(tensor.shape && { shape: tensor.shape }),
      } satisfies TensorData;
  }
  return { model_input: datum.model_input, loss_fn_inputs: inputs };
}

function engineConfig(config: Record<string, number> | undefined): Record<string, number> | undefined {
  return config && Object.fromEntries(Object.entries(config).filter(([key]) => !IGNORED_CONFIG.has(key)));
}

async function lossPass(
  model: ServedModel,
  input: WeaverRequest<"forward">["payload"]["forward_input"],
  backward: boolean,
): Promise<unknown> {
  const datums = input.data.map((d, i) => flatDatum(d, i));
  for (const d of datums) validateLossInputs(input.loss_fn, d, { backend: "weaver" });
  const engineDatums = datums.map(engineDatum);
  const config = engineConfig(input.loss_fn_config);
  const result = await (backward
    ? model.engine.forwardBackward(engineDatums, input.loss_fn, config)
    : model.engine.forward(engineDatums, input.loss_fn, config));
  return {
    result: {
      loss_fn_outputs: result.lossFnOutputs.map((o) => ({ logprobs: { data: o.logprobs, dtype: "float32" } })),
      metrics: result.metrics,
    },
  };
}

async function sample(
  session: SamplingSession,
  model: ServedModel | undefined,
  body: WeaverRequest<"sample">,
): Promise<unknown> {
  if (model?.paused) {
    return {
      result: {
        sequences: Array.from({ length: body.num_samples }, () => ({ tokens: [], Logprobs: [], stopReason: "abort" })),
      },
    };
  }
  const prompt = modelInputTokens(body.prompt);
  const result = await sampleSession(session, prompt, body.sampling_params, body.num_samples);
  return {
    result: {
      sequences: result.sequences.map((s) => ({ tokens: s.tokens, Logprobs: s.logprobs, stopReason: s.stopReason })),
      ...(body.prompt_logprobs && { prompt_logprobs: await session.sampler.computeLogprobs(prompt) }),
    },
  };
}

/** What the route handlers of one Weaver handler share. */
interface WeaverContext {
  readonly store: ModelStore;
  readonly sessions: SessionTable;
  /** The operations handed out, polled with `GET /operations/{id}`. */
  readonly operations: OperationRegistry;
}

/** A request to a route: the id in its path, its body, and `guard`, which makes an `error` fault fail the operation it submits. */
interface WeaverCall {
  readonly id: string;
  readonly raw: unknown;
  guard<T>(run: () => T): () => T;
}

/** A route's answer: its status and body. */
type Answer = [number, unknown];

/** Answers one route. */
type RouteHandler = (ctx: WeaverContext, call: WeaverCall) => Answer | Promise<Answer>;

/** An operation as Weaver answers it: pending, running, done with its response, or failed. */
function operationJson(id: string, op: Operation): unknown {
  const outcome = op.outcome;
  if (!outcome) return { id, status: op.started ? "running" : "pending" };
  if (outcome.ok) return { id, status: "done", response: outcome.value };
  return {
    id,
    status: "error",
    error_code: outcome.category === "user" ? "invalid_request" : "internal_error",
    error_message: outcome.message,
  };
}

/** Registers `op` and answers it as an operation. */
function submit(ctx: WeaverContext, op: Operation): unknown {
  return operationJson(ctx.operations.register(op), op);
}

/** 200 with `op` submitted, counted as activity of session `owner`. */
function submitted(ctx: WeaverContext, owner: string, op: Operation): Answer {
  return [200, submit(ctx, ctx.sessions.track(owner, op))];
}

/** The live session `id`. */
function liveSession(ctx: WeaverContext, id: string): string {
  return ctx.sessions.check(id, "create one with POST /api/v1/sessions");
}

function modelInfo(model: ServedModel): unknown {
  return {
    id: model.id,
    base_model: model.baseModel,
    training_mode: model.trainingMode,
    ...(model.loraRank !== undefined && { lora_config: { rank: model.loraRank, lora_alpha: model.loraAlpha } }),
    tokenizer_path: "byte",
    max_context_length: model.engine.config.contextLength,
  };
}

/** The model a sampling session samples, while it is loaded. */
function samplerModel(ctx: WeaverContext, target: SamplingSession): ServedModel | undefined {
  return target.modelId !== undefined && ctx.store.hasModel(target.modelId)
    ? ctx.store.model(target.modelId)
    : undefined;
}

/** The full_ft model of sampling session `ssid`, whose generation can be paused. */
function pausable(ctx: WeaverContext, ssid: string): ServedModel {
  const model = samplerModel(ctx, ctx.store.samplingSession(ssid));
  if (model?.trainingMode !== "full_ft") {
    throw new ProtocolError(
      "pause-generation and continue-generation apply only to samplers of full_ft models (a LoRA model shares its inference engine)",
      { status: 400, code: "pause_not_supported" },
    );
  }
  return model;
}

function createSession(ctx: WeaverContext, { raw }: WeaverCall): Answer {
  parse("createSession", raw);
  return [200, { id: ctx.sessions.create() }];
}

function heartbeat(ctx: WeaverContext, { id }: WeaverCall): Answer {
  liveSession(ctx, id);
  return [200, { status: "ok" }];
}

function createModel(ctx: WeaverContext, { id, raw }: WeaverCall): Answer {
  const body = parse("createModel", raw);
  liveSession(ctx, id);
  const trainingMode = body.training_mode ?? "lora";
  const model = ctx.store.createModel({
    id: `model-${randomUUID()}`,
    baseModel: body.base_model,
    owner: id,
    trainingMode,
    ...(trainingMode === "lora" && {
      loraRank: body.lora_config?.rank ?? 32,
      loraAlpha: body.lora_config?.lora_alpha,
    }),
    ...(body.lora_config?.seed !== undefined && { seed: body.lora_config.seed }),
  });
  return [200, modelInfo(model)];
}

/** `forward-passes` or `forward-backward-passes` (which of them, from the payload). */
function forwardPass(route: "forward" | "forwardBackward"): RouteHandler {
  return (ctx, { id, raw, guard }) => {
    const { payload } = parse(route, raw);
    const model = ctx.store.model(id);
    const backward = "forward_backward_input" in payload;
    const input = backward ? payload.forward_backward_input : payload.forward_input;
    checkContextLength(datumInputs(input.data), model.engine.config.contextLength);
    const run = guard(() => lossPass(model, input, backward));
    return submitted(
      ctx,
      model.owner,
      model.queue.submit(payload.seq_id, backward ? "forward_backward" : "forward", run),
    );
  };
}

function optimStep(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const { payload } = parse("optimStep", raw);
  const model = ctx.store.model(id);
  const run = guard(async () => ({
    result: { metrics: (await model.engine.optimStep(adamParamsFromWire(payload.adam_params))).metrics },
  }));
  return submitted(ctx, model.owner, model.queue.submit(payload.seq_id, "optim_step", run));
}

function exportSampler(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const body = parse("exportSampler", raw);
  const model = ctx.store.model(id);
  // The Weaver SDK sends its one-hour default itself and leaves ttl_seconds out to keep an export.
  const ttl = body.ttl_seconds ?? null;
  const run = async (): Promise<unknown> => {
    const name = body.path ?? `sampler-${body.seq_id}`;
    const path = `weaver://${model.id}/sampler_weights/${name}`;
    ctx.store.addArtifact(model, path, await model.engine.saveWeightsForSampler(name), ttl);
    return { modelPath: path, ttlSeconds: ttl };
  };
  return submitted(ctx, model.owner, model.queue.submit(body.seq_id, "export_sampler", guard(run)));
}

function saveCheckpoint(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const body = parse("saveCheckpoint", raw);
  const model = ctx.store.model(id);
  const run = async (): Promise<unknown> => {
    const createdAt = Date.now();
    const name = body.name ?? `checkpoint-${createdAt}`;
    const path = `weaver://${model.id}/checkpoints/${name}`;
    const ttl = body.ttl_seconds ?? (body.type === "sampling" ? SAMPLER_TTL_SECONDS : null);
    const file = await model.engine.saveState(name, { optimizer: body.type === "weight_and_optimizer" });
    const { expiresAt } = ctx.store.addArtifact(model, path, file, ttl, createdAt);
    const iso = (ms: number | undefined): string | null => (ms === undefined ? null : new Date(ms).toISOString());
    return {
      id: name,
      path,
      name,
      checkpoint_type: body.type,
      status: "ready",
      ttl_seconds: ttl,
      created_at: iso(createdAt),
      expires_at: iso(expiresAt),
    };
  };
  return submitted(ctx, model.owner, model.queue.append("save_checkpoint", guard(run)));
}

function load(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const body = parse("load", raw);
  const model = ctx.store.model(id);
  const run = async (): Promise<unknown> => {
    await model.engine.loadState(ctx.store.artifact(body.path).file, { optimizer: body.include_optimizer });
    return { path: body.path, include_optimizer: body.include_optimizer };
  };
  return submitted(ctx, model.owner, model.queue.append("load", guard(run)));
}

function terminate(ctx: WeaverContext, { id, raw }: WeaverCall): Answer {
  parse("terminate", raw);
  ctx.store.model(id);
  ctx.store.removeModel(id);
  return [200, { id, status: "terminated" }];
}

/** 201 with a sampler of the base model, or 202 with the operation loading a sampler of an export. */
async function createSamplingSession(ctx: WeaverContext, { id, raw }: WeaverCall): Promise<Answer> {
  const body = parse("createSamplingSession", raw);
  liveSession(ctx, id);
  const ssid = `sampling-${randomUUID()}`;
  // The SDK sends both, null for the one it does not give.
  const source = { modelPath: body.model_path ?? undefined, baseModel: body.base_model ?? undefined };
  if (body.model_path === undefined || body.model_path === null) {
    const opened = await ctx.store.openSampler(ssid, source, id);
    return [201, { id: ssid, base_model: opened.baseModel, tokenizer_path: "byte" }];
  }
  ctx.store.artifact(body.model_path);
  const opening = ctx.sessions.track(
    id,
    runOperation("load_sampler", async () => ({ id: (await ctx.store.openSampler(ssid, source, id)).id })),
  );
  return [202, { sampling_session: { id: ssid, model_path: body.model_path }, sync_operation: submit(ctx, opening) }];
}

function getSamplingSession(ctx: WeaverContext, { id }: WeaverCall): Answer {
  const target = ctx.store.samplingSession(id);
  return [
    200,
    {
      id: target.id,
      base_model: target.baseModel,
      ...(target.modelPath !== undefined && { model_path: target.modelPath }),
    },
  ];
}

function sampleRoute(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const body = parse("sample", raw);
  const target = ctx.store.samplingSession(id);
  checkSampleCount(body.num_samples, "num_samples");
  checkContextLength([{ what: "the prompt", input: body.prompt }], target.contextLength);
  const model = samplerModel(ctx, target);
  const run = guard(() => sample(target, model, body));
  return submitted(ctx, target.owner, samplingOperation(target, "sample", run));
}

function logprobs(ctx: WeaverContext, { id, raw, guard }: WeaverCall): Answer {
  const body = parse("logprobs", raw);
  const target = ctx.store.samplingSession(id);
  checkContextLength([{ what: "the prompt", input: body.prompt }], target.contextLength);
  const run = guard(async () => ({
    result: { prompt_logprobs: await target.sampler.computeLogprobs(modelInputTokens(body.prompt)) },
  }));
  return submitted(ctx, target.owner, samplingOperation(target, "logprobs", run));
}

function pause(ctx: WeaverContext, { id, raw }: WeaverCall): Answer {
  const body = parse("pause", raw);
  if ((body.mode ?? "abort") !== "abort")
    throw new ProtocolError(`nexrl serve implements pause mode abort only, got ${body.mode}`, {
      status: 400,
      code: "unsupported_mode",
    });
  pausable(ctx, id).paused = true;
  return [200, { paused: true, mode: "abort" }];
}

function continueGeneration(ctx: WeaverContext, { id }: WeaverCall): Answer {
  pausable(ctx, id).paused = false;
  return [200, { paused: false }];
}

function getOperation(ctx: WeaverContext, { id }: WeaverCall): Answer {
  const op = ctx.operations.get(id);
  if (!op)
    throw new ProtocolError(`no operation "${id}" on this server (unknown, or forgotten after 10 000 newer ones)`, {
      status: 404,
      code: "operation_not_found",
    });
  return [200, operationJson(id, op)];
}

function supportedModels(ctx: WeaverContext): Answer {
  return [
    200,
    {
      items: ctx.store.presets().map((p) => ({
        name: p.name,
        status: "healthy",
        max_context_length: p.contextLength,
        config: { resource: { tokenizer: { path: "byte" } } },
      })),
    },
  ];
}

function getSession(ctx: WeaverContext, { id }: WeaverCall): Answer {
  return [200, { id: liveSession(ctx, id) }];
}

function getModel(ctx: WeaverContext, { id }: WeaverCall): Answer {
  return [200, modelInfo(ctx.store.model(id))];
}

/** The handler of each route, `<method> <path after /api/v1>`, `{id}` standing for the id the handler is given. */
const HANDLERS = {
  "POST /sessions": createSession,
  "GET /sessions/{id}": getSession,
  "POST /sessions/{id}/heartbeat": heartbeat,
  "POST /sessions/{id}/models": createModel,
  "POST /sessions/{id}/sampling-sessions": createSamplingSession,
  "GET /models/{id}": getModel,
  "POST /models/{id}/forward-passes": forwardPass("forward"),
  "POST /models/{id}/forward-backward-passes": forwardPass("forwardBackward"),
  "POST /models/{id}/optimizer-steps": optimStep,
  "POST /models/{id}/export-sampler": exportSampler,
  "POST /models/{id}/checkpoints": saveCheckpoint,
  "POST /models/{id}/load": load,
  "POST /models/{id}/terminate": terminate,
  "GET /sampling-sessions/{id}": getSamplingSession,
  "POST /sampling-sessions/{id}/samples": sampleRoute,
  "POST /sampling-sessions/{id}/logprobs": logprobs,
  "POST /sampling-sessions/{id}/pause-generation": pause,
  "POST /sampling-sessions/{id}/continue-generation": continueGeneration,
  "GET /operations/{id}": getOperation,
  "GET /supported-models": supportedModels,
} satisfies Record<string, RouteHandler>;

type RouteKey = keyof typeof HANDLERS;

/** A route of {@link HANDLERS}, with the pattern of its path (capturing the id). */
interface Route {
  key: RouteKey;
  method: string;
  pattern: RegExp;
  handle: RouteHandler;
}

/** Every route, in the order of {@link HANDLERS}. */
const ROUTES: Route[] = Object.entries(HANDLERS).map(([key, handle]) => {
  const [method, path] = key.split(" ") as [string, string];
  return {
    key: key as RouteKey,
    method,
    pattern: new RegExp(`^/api/v1${path.replace("{id}", "([^/]+)")}$`),
    handle,
  };
});

/** Routes whose answer is an operation: an `error` fault fails it without applying it. */
const OPERATION_ROUTES = new Set<RouteKey>([
  "POST /models/{id}/forward-passes",
  "POST /models/{id}/forward-backward-passes",
  "POST /models/{id}/optimizer-steps",
  "POST /models/{id}/export-sampler",
  "POST /models/{id}/checkpoints",
  "POST /models/{id}/load",
  "POST /sampling-sessions/{id}/samples",
  "POST /sampling-sessions/{id}/logprobs",
]);

/** Status and `drop` faults go only where the protocol lets a client retry: GETs and heartbeats. */
function applicableFaults(route: Route): FaultKind[] {
  if (route.method === "GET" || route.key === "POST /sessions/{id}/heartbeat") return ["408", "429", "500", "drop"];
  return OPERATION_ROUTES.has(route.key) ? ["error"] : [];
}

/**
 * The Weaver protocol under `/api/v1/`. Faults: status and `drop` faults only on GETs and
 * heartbeats (the protocol forbids retrying a POST that may have reached the server); `error`
 * fails a submitted operation without applying it; `410` does not apply.
 */
export function createWeaverHandler(options: WeaverHandlerOptions): RequestHandler {
  const { faults } = options;
  const ctx: WeaverContext = {
    store: options.store,
    sessions: options.sessions,
    operations: new OperationRegistry(options.inFlight),
  };

  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = requestPath(req);
    let match: RegExpExecArray | null = null;
    const route = ROUTES.find((r) => r.method === req.method && (match = r.pattern.exec(path)) !== null);
    if (!route || !match) return false;
    const raw = req.method === "POST" ? await readJson(req) : {};
    options.capture?.({ protocol: "weaver", method: route.method, path, headers: req.headers, body: raw });
    const fault = faults.draw(applicableFaults(route));
    if (fault && fault !== "error") {
      sendFault(res, fault);
      return true;
    }
    const failed = fault === "error";
    const [status, body] = await route.handle(ctx, {
      id: decodePathSegment((match as RegExpExecArray)[1] ?? "", "id"),
      raw,
      guard: (run) => (failed ? injectedFailure : run),
    });
    sendJson(res, status, body);
    return true;
  };
}
