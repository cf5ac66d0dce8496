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
import { validateLossInputs } from "../types/loss-validation.js";
import { adamParamsFromWire, modelInputTokens, tensorValues, type Datum, type TensorData } from "../types/wire.js";
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

type RouteName =
  | "createSession"
  | "getSession"
  | "heartbeat"
  | "createModel"
  | "createSamplingSession"
  | "getModel"
  | "forward"
  | "forwardBackward"
  | "optimStep"
  | "exportSampler"
  | "saveCheckpoint"
  | "load"
  | "terminate"
  | "getSamplingSession"
  | "sample"
  | "logprobs"
  | "pause"
  | "continue"
  | "getOperation"
  | "supportedModels";

type Route = { method: "GET" | "POST"; pattern: RegExp; name: RouteName };

const ROUTES: Route[] = [
  { method: "POST", pattern: /^\/api\/v1\/sessions$/, name: "createSession" },
  { method: "GET", pattern: /^\/api\/v1\/sessions\/([^/]+)$/, name: "getSession" },
  { method: "POST", pattern: /^\/api\/v1\/sessions\/([^/]+)\/heartbeat$/, name: "heartbeat" },
  { method: "POST", pattern: /^\/api\/v1\/sessions\/([^/]+)\/models$/, name: "createModel" },
  { method: "POST", pattern: /^\/api\/v1\/sessions\/([^/]+)\/sampling-sessions$/, name: "createSamplingSession" },
  { method: "GET", pattern: /^\/api\/v1\/models\/([^/]+)$/, name: "getModel" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/forward-passes$/, name: "forward" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/forward-backward-passes$/, name: "forwardBackward" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/optimizer-steps$/, name: "optimStep" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/export-sampler$/, name: "exportSampler" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/checkpoints$/, name: "saveCheckpoint" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/load$/, name: "load" },
  { method: "POST", pattern: /^\/api\/v1\/models\/([^/]+)\/terminate$/, name: "terminate" },
  { method: "GET", pattern: /^\/api\/v1\/sampling-sessions\/([^/]+)$/, name: "getSamplingSession" },
  { method: "POST", pattern: /^\/api\/v1\/sampling-sessions\/([^/]+)\/samples$/, name: "sample" },
  { method: "POST", pattern: /^\/api\/v1\/sampling-sessions\/([^/]+)\/logprobs$/, name: "logprobs" },
  { method: "POST", pattern: /^\/api\/v1\/sampling-sessions\/([^/]+)\/pause-generation$/, name: "pause" },
  { method: "POST", pattern: /^\/api\/v1\/sampling-sessions\/([^/]+)\/continue-generation$/, name: "continue" },
  { method: "GET", pattern: /^\/api\/v1\/operations\/([^/]+)$/, name: "getOperation" },
  { method: "GET", pattern: /^\/api\/v1\/supported-models$/, name: "supportedModels" },
];

/** Routes whose answer is an operation: an `error` fault fails it without applying it. */
const OPERATION_ROUTES = new Set<RouteName>([
  "forward",
  "forwardBackward",
  "optimStep",
  "exportSampler",
  "saveCheckpoint",
  "load",
  "sample",
  "logprobs",
]);

/** Status and `drop` faults go only where the protocol lets a client retry: GETs and heartbeats. */
function applicableFaults(route: Route): FaultKind[] {
  if (route.method === "GET" || route.name === "heartbeat") return ["408", "429", "500", "drop"];
  return OPERATION_ROUTES.has(route.name) ? ["error"] : [];
}

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

/**
 * The Weaver protocol under `/api/v1/`. Faults: status and `drop` faults only on GETs and
 * heartbeats (the protocol forbids retrying a POST that may have reached the server); `error`
 * fails a submitted operation without applying it; `410` does not apply.
 */
export function createWeaverHandler(options: WeaverHandlerOptions): RequestHandler {
  const { store, faults, sessions } = options;
  const operations = new OperationRegistry(options.inFlight);

  const operationJson = (id: string, op: Operation): unknown => {
    const outcome = op.outcome;
    if (!outcome) return { id, status: op.started ? "running" : "pending" };
    if (outcome.ok) return { id, status: "done", response: outcome.value };
    return {
      id,
      status: "error",
      error_code: outcome.category === "user" ? "invalid_request" : "internal_error",
      error_message: outcome.message,
    };
  };
  const submit = (op: Operation): unknown => operationJson(operations.register(op), op);
  const session = (id: string): string => sessions.check(id, "create one with POST /api/v1/sessions");
  /** `op`, counted as activity of session `owner` when it is submitted and when it finishes. */
  const activity = (owner: string, op: Operation): Operation => {
    sessions.refresh(owner);
    void op.done.then(() => sessions.refresh(owner));
    return op;
  };
  const modelInfo = (model: ServedModel): unknown => ({
    id: model.id,
    base_model: model.baseModel,
    training_mode: model.trainingMode,
    ...(model.loraRank !== undefined && { lora_config: { rank: model.loraRank, lora_alpha: model.loraAlpha } }),
    tokenizer_path: "byte",
    max_context_length: model.engine.config.contextLength,
  });
  const pausable = (ssid: string): ServedModel => {
    const target = store.samplingSession(ssid);
    const model =
      target.modelId !== undefined && store.hasModel(target.modelId) ? store.model(target.modelId) : undefined;
    if (model?.trainingMode !== "full_ft") {
      throw new ProtocolError(
        "pause-generation and continue-generation apply only to samplers of full_ft models (a LoRA model shares its inference engine)",
        { status: 400, code: "pause_not_supported" },
      );
    }
    return model;
  };

  const handle = async (route: Route, id: string, raw: unknown, failed: boolean): Promise<[number, unknown]> => {
    const guard = <T>(run: () => T): (() => T) => (failed ? injectedFailure : run);
    switch (route.name) {
      case "createSession": {
        parse("createSession", raw);
        return [200, { id: sessions.create() }];
      }
      case "getSession":
        return [200, { id: session(id) }];
      case "heartbeat":
        session(id);
        return [200, { status: "ok" }];
      case "createModel": {
        const body = parse("createModel", raw);
        session(id);
        const trainingMode = body.training_mode ?? "lora";
        const model = store.createModel({
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
      case "getModel":
        return [200, modelInfo(store.model(id))];
      case "forward":
      case "forwardBackward": {
        const { payload } = parse(route.name, raw);
        const model = store.model(id);
        const backward = "forward_backward_input" in payload;
        const input = backward ? payload.forward_backward_input : payload.forward_input;
        checkContextLength(datumInputs(input.data), model.engine.config.contextLength);
        const run = guard(() => lossPass(model, input, backward));
        return [
          200,
          submit(
            activity(model.owner, model.queue.submit(payload.seq_id, backward ? "forward_backward" : "forward", run)),
          ),
        ];
      }
      case "optimStep": {
        const { payload } = parse("optimStep", raw);
        const model = store.model(id);
        return [
          200,
          submit(
            activity(
              model.owner,
              model.queue.submit(
                payload.seq_id,
                "optim_step",
                guard(async () => ({
                  result: { metrics: (await model.engine.optimStep(adamParamsFromWire(payload.adam_params))).metrics },
                })),
              ),
            ),
          ),
        ];
      }
      case "exportSampler": {
        const body = parse("exportSampler", raw);
        const model = store.model(id);
        // The Weaver SDK sends its one-hour default itself and leaves ttl_seconds out to keep an export.
        const ttl = body.ttl_seconds ?? null;
        const run = async (): Promise<unknown> => {
          const name = body.path ?? `sampler-${body.seq_id}`;
          const path = `weaver://${model.id}/sampler_weights/${name}`;
          store.addArtifact(model, path, await model.engine.saveWeightsForSampler(name), ttl);
          return { modelPath: path, ttlSeconds: ttl };
        };
        return [200, submit(activity(model.owner, model.queue.submit(body.seq_id, "export_sampler", guard(run))))];
      }
      case "saveCheckpoint": {
        const body = parse("saveCheckpoint", raw);
        const model = store.model(id);
        const run = async (): Promise<unknown> => {
          const createdAt = Date.now();
          const name = body.name ?? `checkpoint-${createdAt}`;
          const path = `weaver://${model.id}/checkpoints/${name}`;
          const ttl = body.ttl_seconds ?? (body.type === "sampling" ? SAMPLER_TTL_SECONDS : null);
          const file = await model.engine.saveState(name, { optimizer: body.type === "weight_and_optimizer" });
          const { expiresAt } = store.addArtifact(model, path, file, ttl, createdAt);
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
        return [200, submit(activity(model.owner, model.queue.append("save_checkpoint", guard(run))))];
      }
      case "load": {
        const body = parse("load", raw);
        const model = store.model(id);
        const run = async (): Promise<unknown> => {
          await model.engine.loadState(store.artifact(body.path).file, { optimizer: body.include_optimizer });
          return { path: body.path, include_optimizer: body.include_optimizer };
        };
        return [200, submit(activity(model.owner, model.queue.append("load", guard(run))))];
      }
      case "terminate":
        parse("terminate", raw);
        store.model(id);
        store.removeModel(id);
        return [200, { id, status: "terminated" }];
      case "createSamplingSession": {
        const body = parse("createSamplingSession", raw);
        session(id);
        const ssid = `sampling-${randomUUID()}`;
        // The SDK sends both, null for the one it does not give.
        const source = { modelPath: body.model_path ?? undefined, baseModel: body.base_model ?? undefined };
        if (body.model_path === undefined || body.model_path === null) {
          const opened = await store.openSampler(ssid, source, id);
          return [201, { id: ssid, base_model: opened.baseModel, tokenizer_path: "byte" }];
        }
        store.artifact(body.model_path);
        const load = activity(
          id,
          runOperation("load_sampler", async () => ({ id: (await store.openSampler(ssid, source, id)).id })),
        );
        return [202, { sampling_session: { id: ssid, model_path: body.model_path }, sync_operation: submit(load) }];
      }
      case "getSamplingSession": {
        const target = store.samplingSession(id);
        return [
          200,
          {
            id: target.id,
            base_model: target.baseModel,
            ...(target.modelPath !== undefined && { model_path: target.modelPath }),
          },
        ];
      }
      case "sample": {
        const body = parse("sample", raw);
        const target = store.samplingSession(id);
        checkSampleCount(body.num_samples, "num_samples");
        checkContextLength([{ what: "the prompt", input: body.prompt }], target.contextLength);
        const model =
          target.modelId !== undefined && store.hasModel(target.modelId) ? store.model(target.modelId) : undefined;
        return [
          200,
          submit(
            activity(
              target.owner,
              samplingOperation(
                target,
                "sample",
                guard(() => sample(target, model, body)),
              ),
            ),
          ),
        ];
      }
      case "logprobs": {
        const body = parse("logprobs", raw);
        const target = store.samplingSession(id);
        checkContextLength([{ what: "the prompt", input: body.prompt }], target.contextLength);
        return [
          200,
          submit(
            activity(
              target.owner,
              samplingOperation(
                target,
                "logprobs",
                guard(async () => ({
                  result: { prompt_logprobs: await target.sampler.computeLogprobs(modelInputTokens(body.prompt)) },
                })),
              ),
            ),
          ),
        ];
      }
      case "pause": {
        const body = parse("pause", raw);
        if ((body.mode ?? "abort") !== "abort")
          throw new ProtocolError(`nexrl serve implements pause mode abort only, got ${body.mode}`, {
            status: 400,
            code: "unsupported_mode",
          });
        pausable(id).paused = true;
        return [200, { paused: true, mode: "abort" }];
      }
      case "continue":
        pausable(id).paused = false;
        return [200, { paused: false }];
      case "getOperation": {
        const op = operations.get(id);
        if (!op)
          throw new ProtocolError(
            `no operation "${id}" on this server (unknown, or forgotten after 10 000 newer ones)`,
            { status: 404, code: "operation_not_found" },
          );
        return [200, operationJson(id, op)];
      }
      case "supportedModels":
        return [
          200,
          {
            items: store.presets().map((p) => ({
              name: p.name,
              status: "healthy",
              max_context_length: p.contextLength,
              config: { resource: { tokenizer: { path: "byte" } } },
            })),
          },
        ];
    }
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
    const [status, body] = await handle(
      route,
      decodePathSegment((match as RegExpExecArray)[1] ?? "", "id"),
      raw,
      fault === "error",
    );
    sendJson(res, status, body);
    return true;
  };
}
