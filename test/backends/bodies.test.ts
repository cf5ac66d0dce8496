/**
 * The request bodies the tinker and weaver clients send, captured by `nexrl serve` and compared
 * with the documented JSON (wire-protocols §1.4 and §3.2): field names, `type` literals, dtypes,
 * shapes, omitted nulls.
 */
import { describe, expect, it, vi } from "vitest";
import type { CapturedRequest } from "../../src/server/index.js";
import { TinkerTrainingService, WeaverTrainingService, type WeaverSamplingClient } from "../../src/backends/index.js";
import { adamParams, datum, modelInputFromTokens } from "../../src/wire/wire.js";
import { API_KEY, FAST, serve, tokens } from "../support/training.js";

const text = tokens("hi!");
const input = text.slice(0, -1);
const targets = text.slice(1);
const n = targets.length;
const ADAM = adamParams({ learningRate: 0.01 });
const ADAM_JSON = { learning_rate: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-12, weight_decay: 0, grad_clip_norm: 0 };
const MODEL_INPUT = { chunks: [{ type: "encoded_text", tokens: input }] };
const SAMPLING = { maxTokens: 5, seed: 3, stop: ["\n"], temperature: 0.7, topK: 20, topP: 0.9 };

function bodies(requests: CapturedRequest[], path: string | RegExp): unknown[] {
  return requests.filter((r) => (typeof path === "string" ? r.path === path : path.test(r.path))).map((r) => r.body);
}

function nulls(value: unknown, at = "body"): string[] {
  if (value === null) return [at];
  if (Array.isArray(value)) return value.flatMap((v, i) => nulls(v, `${at}[${i}]`));
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => nulls(v, `${at}.${k}`));
  return [];
}

describe("tinker request bodies", () => {
  it("match the documented JSON for every endpoint the client calls", async () => {
    const server = await serve({ protocol: "tinker" });
    const svc = new TinkerTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST, heartbeatIntervalMs: 5 });
    try {
      const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 7, loraRank: 8 });
      const sft = datum(input, { target_tokens: targets, weights: targets.map(() => 1), mask: targets.map(() => 1) });
      const rl = datum(input, {
        target_tokens: targets,
        logprobs: targets.map(() => -1),
        advantages: targets.map((_, i) => (i ? 0.5 : 0)),
        loss_mask: targets.map((_, i) => (i ? 1 : 0)),
      });
      await (await client.forward([sft], "cross_entropy")).result();
      await (await client.forwardBackward([rl], "ppo", { clip_low_threshold: 0.7 })).result();
      await (await client.optimStep(ADAM)).result();
      const { path: ckpt } = await (
        await client.saveState("ckpt", { kind: "weights_and_optimizer", ttlSeconds: 600 })
      ).result();
      await (await client.loadState(ckpt, { optimizer: true })).result();
      const { path: snapshot } = await (await client.saveWeightsForSampler("s1")).result();
      const info = await client.getInfo();
      const sampler = await svc.createSamplingClient(snapshot);
      await (await sampler.sample(modelInputFromTokens(input), 2, SAMPLING)).result();
      await sampler.computeLogprobs(text);
      await svc.createSamplingClient("tiny");
      await vi.waitFor(() => expect(bodies(server.requests, "/api/v1/session_heartbeat").length).toBeGreaterThan(0));

      const model_id = client.modelId;
      const [session] = bodies(server.requests, "/api/v1/create_session");
      const session_id = model_id.split(":")[0];
      expect(info).toEqual({
        modelId: model_id,
        baseModel: "tiny",
        loraRank: 8,
        tokenizerId: "byte",
        contextLength: 128,
      });
      expect(bodies(server.requests, "/api/v1/client/config")).toEqual([{ sdk_version: "0.24.1" }]);
      expect(session).toEqual({ tags: [], user_metadata: {}, sdk_version: "0.24.1", type: "create_session" });
      expect(bodies(server.requests, "/api/v1/session_heartbeat")[0]).toEqual({
        session_id,
        type: "session_heartbeat",
      });
      expect(bodies(server.requests, "/api/v1/create_model")).toEqual([
        {
          session_id,
          model_seq_id: 0,
          base_model: "tiny",
          lora_config: { rank: 8, seed: 7, train_unembed: true, train_mlp: true, train_attn: true },
          type: "create_model",
        },
      ]);
      const wire = (inputs: Record<string, [number[], string]>) => ({
        model_input: MODEL_INPUT,
        loss_fn_inputs: Object.fromEntries(
          Object.entries(inputs).map(([k, [data, dtype]]) => [k, { data, dtype, shape: [n] }]),
        ),
      });
      expect(bodies(server.requests, "/api/v1/forward")).toEqual([
        {
          forward_input: {
            data: [wire({ target_tokens: [targets, "int64"], weights: [targets.map(() => 1), "float32"] })],
            loss_fn: "cross_entropy",
          },
          model_id,
          seq_id: 1,
        },
      ]);
      expect(bodies(server.requests, "/api/v1/forward_backward")).toEqual([
        {
          forward_backward_input: {
            data: [
              wire({
                target_tokens: [targets, "int64"],
                logprobs: [targets.map(() => -1), "float32"],
                advantages: [targets.map((_, i) => (i ? 0.5 : 0)), "float32"],
              }),
            ],
            loss_fn: "ppo",
            loss_fn_config: { clip_low_threshold: 0.7 },
          },
          model_id,
          seq_id: 2,
        },
      ]);
      expect(bodies(server.requests, "/api/v1/optim_step")).toEqual([
        { adam_params: ADAM_JSON, model_id, seq_id: 3, type: "optim_step" },
      ]);
      expect(bodies(server.requests, "/api/v1/save_weights")).toEqual([
        { model_id, path: "ckpt", seq_id: 4, ttl_seconds: 600, overwrite: true, type: "save_weights" },
      ]);
      expect(ckpt).toBe(`tinker://${model_id}/weights/ckpt`);
      expect(bodies(server.requests, "/api/v1/load_weights")).toEqual([
        { model_id, seq_id: 5, path: ckpt, optimizer: true, type: "load_weights" },
      ]);
      expect(bodies(server.requests, "/api/v1/save_weights_for_sampler")).toEqual([
        { model_id, path: "s1", seq_id: 6, type: "save_weights_for_sampler" },
      ]);
      expect(snapshot).toBe(`tinker://${model_id}/sampler_weights/s1`);
      expect(bodies(server.requests, "/api/v1/get_info")).toEqual([{ model_id, type: "get_info" }]);
      expect(bodies(server.requests, "/api/v1/create_sampling_session")).toEqual([
        { session_id, sampling_session_seq_id: 0, model_path: snapshot, type: "create_sampling_session" },
        { session_id, sampling_session_seq_id: 1, base_model: "tiny", type: "create_sampling_session" },
      ]);
      const sampling_session_id = `${session_id}:sample:0`;
      expect(bodies(server.requests, "/api/v1/asample")).toEqual([
        {
          sampling_session_id,
          seq_id: 0,
          num_samples: 2,
          prompt: MODEL_INPUT,
          sampling_params: { max_tokens: 5, seed: 3, stop: ["\n"], temperature: 0.7, top_k: 20, top_p: 0.9 },
          prompt_logprobs: false,
          topk_prompt_logprobs: 0,
          type: "sample",
        },
        {
          sampling_session_id,
          seq_id: 1,
          num_samples: 1,
          prompt: { chunks: [{ type: "encoded_text", tokens: text }] },
          sampling_params: { max_tokens: 1, temperature: 1, top_k: -1, top_p: 1 },
          prompt_logprobs: true,
          topk_prompt_logprobs: 0,
          type: "sample",
        },
      ]);
      for (const body of bodies(server.requests, "/api/v1/retrieve_future"))
        expect(body).toEqual({ request_id: expect.any(String), allow_metadata_only: false });
      expect(server.requests.filter((r) => r.path === "/api/v1/get_server_capabilities").map((r) => r.method)).toEqual([
        "GET",
      ]);

      for (const request of server.requests) {
        expect(nulls(request.body), request.path).toEqual([]);
        expect(request.headers["x-api-key"]).toBe(API_KEY);
      }
      const submits = server.requests.filter((r) =>
        ["forward", "forward_backward", "optim_step", "asample", "create_model"].some((e) => r.path === `/api/v1/${e}`),
      );
      for (const r of submits) expect(r.headers["x-idempotency-key"]).toMatch(/^nexrl-retry-/);
      expect(server.requests.find((r) => r.path === "/api/v1/optim_step")!.headers["x-tinker-request-type"]).toBe(
        "OptimStep",
      );
      expect(server.requests.find((r) => r.path === "/api/v1/asample")!.headers["x-tinker-sampling-backpressure"]).toBe(
        "1",
      );
    } finally {
      await svc.close();
    }
  });

  it("speak 0.18.2's save_weights on the json wire: no overwrite, which that release's schema lacks", async () => {
    const server = await serve({ protocol: "tinker" });
    const svc = new TinkerTrainingService({
      baseUrl: server.url,
      apiKey: API_KEY,
      ...FAST,
      heartbeatIntervalMs: 5,
      wire: "json",
    });
    try {
      const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 7, loraRank: 8 });
      await (await client.saveState("ckpt", { kind: "weights_and_optimizer" })).result();
      const [session] = bodies(server.requests, "/api/v1/create_session") as Array<{ sdk_version: string }>;
      expect(session!.sdk_version).toBe("0.18.2");
      const [save] = bodies(server.requests, "/api/v1/save_weights") as Array<Record<string, unknown>>;
      expect(Object.keys(save!).sort()).toEqual(["model_id", "path", "seq_id", "type"]);
    } finally {
      await svc.close();
    }
  });
});

describe("weaver request bodies", () => {
  it("match the documented JSON for every endpoint the client calls", async () => {
    const server = await serve({ protocol: "weaver" });
    const svc = new WeaverTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST, heartbeatIntervalMs: 5 });
    const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 7, loraRank: 8 });
    const full = await svc.createTrainingClient({ baseModel: "tiny", trainingMode: "full_ft" });
    const sft = datum(input, { target_tokens: targets, weights: targets.map(() => 1) });
    const advantages = targets.map((_, i) => (i ? 0.5 : 0));
    const rl = datum(input, { target_tokens: targets, logprobs: targets.map(() => -1), advantages });
    await (await client.forward([sft], "cross_entropy")).result();
    await (await client.forwardBackward([rl], "importance_sampling", { entropy_coeff: 1e-4 })).result();
    await (await client.optimStep(ADAM)).result();
    const { path: ckpt } = await (await client.saveState("ckpt", { kind: "weights_and_optimizer" })).result();
    await (await client.saveCheckpoint("samp", { type: "sampling", ttlSeconds: 60 })).result();
    await (await client.loadState(ckpt, { optimizer: true })).result();
    const { path: snapshot } = await (await client.saveWeightsForSampler("s1")).result();
    await client.getInfo();
    const sampler = await svc.createSamplingClient(snapshot);
    await (await sampler.sample(modelInputFromTokens(input), 2, SAMPLING)).result();
    await sampler.computeLogprobs(text);
    await svc.createSamplingClient("tiny");
    const { path: fullSnapshot } = await (await full.saveWeightsForSampler("f1")).result();
    const fullSampler = (await svc.createSamplingClient(fullSnapshot)) as WeaverSamplingClient;
    await fullSampler.pauseGeneration();
    await fullSampler.continueGeneration();
    await vi.waitFor(() => expect(server.requests.some((r) => r.path.endsWith("/heartbeat"))).toBe(true));
    await svc.close();

    const [sessionRequest] = bodies(server.requests, "/api/v1/sessions");
    expect(sessionRequest).toEqual({ tags: ["nexrl"], user_metadata: {}, sdk_version: "nexrl-0.1" });
    const sid = server.requests.find((r) => r.path.endsWith("/models"))!.path.split("/")[4];
    const mid = client.modelId;
    const at = (route: string) => `/api/v1/models/${mid}/${route}`;
    expect(bodies(server.requests, `/api/v1/sessions/${sid}/heartbeat`)[0]).toEqual({});
    expect(bodies(server.requests, `/api/v1/sessions/${sid}/models`)).toEqual([
      {
        model_seq_id: 1,
        base_model: "tiny",
        training_mode: "lora",
        lora_config: { rank: 8, train_unembed: true, train_mlp: true, train_attn: true, seed: 7 },
      },
      { model_seq_id: 2, base_model: "tiny", training_mode: "full_ft" },
    ]);
    const wire = (inputs: Record<string, [number[], string]>) => ({
      model_input: MODEL_INPUT,
      loss_fn_inputs: Object.fromEntries(Object.entries(inputs).map(([k, [data, dtype]]) => [k, { data, dtype }])),
    });
    expect(bodies(server.requests, at("forward-passes"))).toEqual([
      {
        payload: {
          model_id: mid,
          seq_id: 1,
          forward_input: {
            loss_fn: "cross_entropy",
            data: [wire({ target_tokens: [targets, "int64"], weights: [targets.map(() => 1), "float32"] })],
          },
        },
      },
    ]);
    expect(bodies(server.requests, at("forward-backward-passes"))).toEqual([
      {
        payload: {
          model_id: mid,
          seq_id: 2,
          forward_backward_input: {
            loss_fn: "importance_sampling",
            data: [
              wire({
                target_tokens: [targets, "int64"],
                logprobs: [targets.map(() => -1), "float32"],
                advantages: [advantages, "float32"],
                loss_mask: [advantages.map((a) => (a !== 0 ? 1 : 0)), "float32"],
              }),
            ],
            loss_fn_config: { entropy_coeff: 1e-4 },
          },
        },
      },
    ]);
    expect(bodies(server.requests, at("optimizer-steps"))).toEqual([
      { payload: { model_id: mid, seq_id: 3, adam_params: ADAM_JSON } },
    ]);
    expect(bodies(server.requests, at("checkpoints"))).toEqual([
      { type: "weight_and_optimizer", name: "ckpt" },
      { type: "sampling", name: "samp", ttl_seconds: 60 },
    ]);
    expect(ckpt).toBe(`weaver://${mid}/checkpoints/ckpt`);
    expect(bodies(server.requests, at("load"))).toEqual([{ path: ckpt, include_optimizer: true }]);
    expect(bodies(server.requests, at("export-sampler"))).toEqual([{ seq_id: 4, path: "s1", ttl_seconds: 3600 }]);
    expect(bodies(server.requests, `/api/v1/sessions/${sid}/sampling-sessions`)).toEqual([
      // As the Weaver SDK: base_model and model_path always, null for the one not given.
      { sampling_session_seq_id: 1, base_model: null, model_path: snapshot, model_id: mid },
      { sampling_session_seq_id: 2, base_model: "tiny", model_path: null },
      { sampling_session_seq_id: 3, base_model: null, model_path: fullSnapshot, model_id: full.modelId },
    ]);
    expect(bodies(server.requests, /\/samples$/)).toEqual([
      {
        prompt: MODEL_INPUT,
        sampling_params: { temperature: 0.7, top_p: 0.9, top_k: 20, max_tokens: 5, stop: ["\n"], seed: 3 },
        num_samples: 2,
        prompt_logprobs: false,
        topk_prompt_logprobs: 0,
      },
    ]);
    expect(bodies(server.requests, /\/logprobs$/)).toEqual([
      { prompt: { chunks: [{ type: "encoded_text", tokens: text }] } },
    ]);
    expect(bodies(server.requests, /\/pause-generation$/)).toEqual([{ mode: "abort" }]);
    expect(bodies(server.requests, /\/continue-generation$/)).toEqual([{}]);
    expect(bodies(server.requests, /\/terminate$/)).toEqual([
      { instance_types: ["trainer", "inference"] },
      { instance_types: ["trainer", "inference"] },
    ]);
    expect(
      server.requests.filter((r) => r.path.startsWith("/api/v1/operations/")).every((r) => r.method === "GET"),
    ).toBe(true);
    expect(server.requests.some((r) => r.method === "GET" && r.path === `/api/v1/models/${mid}`)).toBe(true);
    for (const request of server.requests) {
      const allowed = request.path.endsWith("/sampling-sessions") ? ["body.base_model", "body.model_path"] : [];
      expect(
        nulls(request.body).filter((at) => !allowed.includes(at)),
        request.path,
      ).toEqual([]);
      expect(request.headers["x-weaver-api-key"]).toBe(API_KEY);
    }
  });
});
