import { describe, expect, it } from "vitest";
import { HttpTransport } from "../../src/http/index.js";
import { WeaverTrainingService, type WeaverSamplingClient } from "../../src/backends/index.js";
import { field } from "../../src/backends/weaver/fields.js";
import { readLossPass, weaverDatums, weaverSamplingParams } from "../../src/backends/weaver/wire.js";
import { adamParams, datum, modelInputFromTokens, type Datum } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tokens } from "../support/training.js";
import { ConfigError, InputError, NotFoundError, RemoteOperationError } from "../../src/errors.js";

const SFT = [sftDatum("igpay atinlay")];

async function weaver() {
  const server = await serve({ protocol: "weaver" });
  const svc = new WeaverTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
  onCleanup(() => svc.close());
  return { server, svc };
}

describe("weaver pause and continue", () => {
  it("aborts sampling while a full_ft model's generation is paused, and resumes after continue", async () => {
    const { svc } = await weaver();
    const model = await svc.createTrainingClient({ baseModel: "tiny", trainingMode: "full_ft" });
    const sampler = (await svc.createSamplingClient(
      (await (await model.saveWeightsForSampler("s")).result()).path,
    )) as WeaverSamplingClient;
    const prompt = modelInputFromTokens(tokens("ab"));
    await sampler.pauseGeneration("abort");
    try {
      const paused = await (await sampler.sample(prompt, 2, { maxTokens: 3, seed: 1 })).result();
      expect(paused.sequences).toEqual([
        { tokens: [], logprobs: [], stopReason: "abort" },
        { tokens: [], logprobs: [], stopReason: "abort" },
      ]);
    } finally {
      await sampler.continueGeneration();
    }
    const resumed = await (await sampler.sample(prompt, 1, { maxTokens: 3, seed: 1 })).result();
    expect(resumed.sequences[0]!.tokens.length).toBeGreaterThan(0);
    expect(resumed.sequences[0]!.stopReason).not.toBe("abort");
  });

  it("refuses to pause a LoRA model's sampler before sending anything, and the server refuses too", async () => {
    const { server, svc } = await weaver();
    const model = await svc.createTrainingClient({ baseModel: "tiny" });
    const { path } = await (await model.saveWeightsForSampler("s")).result();
    const sampler = (await svc.createSamplingClient(path)) as WeaverSamplingClient;
    await expect(sampler.pauseGeneration()).rejects.toThrow(ConfigError);
    await expect(sampler.continueGeneration()).rejects.toThrow(/applies only to full_ft models/);
    expect(server.requests.some((r) => r.path.endsWith("-generation"))).toBe(false);
    // A client that does not know the model's mode asks the server, which refuses.
    const stranger = new WeaverTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
    onCleanup(() => stranger.close());
    const unknown = (await stranger.createSamplingClient(path)) as WeaverSamplingClient;
    await expect(unknown.pauseGeneration()).rejects.toThrow(
      /pause-generation and continue-generation apply only to samplers of full_ft models/,
    );
  });
});

describe("weaver checkpoints and exports", () => {
  it("saves weight, weight_and_optimizer and sampling checkpoints, and loads the optimizer only from the one that has it", async () => {
    const { svc } = await weaver();
    const model = await svc.createTrainingClient({ baseModel: "tiny", seed: 3 });
    await (await model.forwardBackward(SFT, "cross_entropy")).result();
    await (await model.optimStep(adamParams({ learningRate: 1e-2 }))).result();
    const weights = await (await model.saveState("w", { kind: "weights" })).result();
    const full = await (await model.saveState("wo", { kind: "weights_and_optimizer" })).result();
    const sampling = await (await model.saveCheckpoint("samp", { type: "sampling" })).result();
    expect([weights.path, full.path, sampling.path]).toEqual(
      ["w", "wo", "samp"].map((n) => `weaver://${model.modelId}/checkpoints/${n}`),
    );
    await (await model.loadState(full.path, { optimizer: true })).result();
    await (await model.loadState(weights.path, { optimizer: false })).result();
    const error = await (await model.loadState(weights.path, { optimizer: true })).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteOperationError);
    expect((error as Error).message).toMatch(/holds weights only/);
    // A sampling checkpoint serves a sampler.
    const sampler = await svc.createSamplingClient(sampling.path);
    expect((await sampler.computeLogprobs(tokens("ab")))[0]).toBeNull();
  });

  it("exports samplers with a one-hour TTL by default; an expired export is not found", async () => {
    const { server, svc } = await weaver();
    const model = await svc.createTrainingClient({ baseModel: "tiny" });
    await (await model.saveWeightsForSampler("hour")).result();
    const { path: gone } = await (await model.saveWeightsForSampler("gone", { ttlSeconds: 0 })).result();
    await (await model.saveWeightsForSampler("kept", { ttlSeconds: null })).result();
    expect(
      server.requests
        .filter((r) => r.path.endsWith("/export-sampler"))
        .map((r) => (r.body as { ttl_seconds?: unknown }).ttl_seconds),
    ).toEqual([3600, 0, undefined]); // a kept export leaves ttl_seconds out, as the Weaver SDK does
    const error = await svc.createSamplingClient(gone).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toMatch(/expired/);
  });

  it("terminates the models it created when closed", async () => {
    const { server, svc } = await weaver();
    const model = await svc.createTrainingClient({ baseModel: "tiny" });
    expect((await model.getInfo()).contextLength).toBe(128);
    await svc.close();
    expect(server.requests.filter((r) => r.path === `/api/v1/models/${model.modelId}/terminate`)).toHaveLength(1);
    const http = new HttpTransport({
      baseUrl: server.url,
      apiKey: API_KEY,
      apiKeyHeader: "X-WEAVER-API-KEY",
      maxRetries: 0,
    });
    onCleanup(() => http.close());
    await expect(http.request({ method: "GET", path: `/api/v1/models/${model.modelId}` })).rejects.toThrow(
      NotFoundError,
    );
  });
});

describe("weaver wire", () => {
  it("sends tensors as lists without shape (sparse ones dense), and a loss_mask for importance_sampling", () => {
    const d: Datum = {
      model_input: modelInputFromTokens([1, 2, 3]),
      loss_fn_inputs: {
        target_tokens: { data: [2, 3, 4], dtype: "int64", shape: [3] },
        weights: { data: [1], dtype: "float32", shape: [1, 3], sparse_crow_indices: [0, 1], sparse_col_indices: [2] },
      },
    };
    expect(weaverDatums([d], "cross_entropy")[0]!.loss_fn_inputs).toEqual({
      target_tokens: { data: [2, 3, 4], dtype: "int64" },
      weights: { data: [0, 0, 1], dtype: "float32" },
    });
    const rl = datum([1, 2, 3], { target_tokens: [2, 3, 4], logprobs: [-1, -1, -1], advantages: [0, 0.5, -2] });
    expect(weaverDatums([rl], "importance_sampling")[0]!.loss_fn_inputs.loss_mask).toEqual({
      data: [0, 1, 1],
      dtype: "float32",
    });
    const given = datum([1, 2, 3], {
      target_tokens: [2, 3, 4],
      logprobs: [-1, -1, -1],
      advantages: [1, 1, 1],
      loss_mask: [0, 0, 1],
    });
    expect(weaverDatums([given], "importance_sampling")[0]!.loss_fn_inputs.loss_mask!.data).toEqual([0, 0, 1]);
    expect(() => weaverDatums([], "cross_entropy")).toThrow(/no datums/);
  });

  it("takes stop strings only", () => {
    expect(weaverSamplingParams({ maxTokens: 2, stop: ["\n"] })).toEqual({
      temperature: 1,
      top_p: 1,
      top_k: -1,
      max_tokens: 2,
      stop: ["\n"],
    });
    expect(() => weaverSamplingParams({ maxTokens: 2, stop: [10] })).toThrow(InputError);
  });

  it("reads fields in any casing and aggregates task metrics", () => {
    expect(field({ ModelPath: "a" }, "model_path")).toBe("a");
    expect(field({ modelPath: "b" }, "model_path")).toBe("b");
    expect(field({ model_path: "c", modelPath: "d" }, "model_path")).toBe("c");
    const out = readLossPass({
      Result: {
        LossFnOutputs: [{ Logprobs: { data: [-1, -2] } }],
        forward_backward_task_results: {
          a: { metrics: { "loss:sum": 1, tokens: 3, "kl:mean": 0.5 } },
          b: { Metrics: { "loss:sum": 2, tokens: 4, "kl:mean": 1.5 } },
        },
      },
    });
    expect(out).toEqual({
      lossFnOutputs: [{ logprobs: [-1, -2] }],
      metrics: { "loss:sum": 3, tokens: 7, "kl:mean": 1 },
    });
  });
});
