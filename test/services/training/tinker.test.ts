import { describe, expect, it } from "vitest";
import { MissingApiKeyError } from "../../../src/http/endpoint.js";
import {
  LocalTrainingService,
  TinkerTrainingService,
  TrainingServiceConfigError,
  UnsupportedTrainingModeError,
  chunkDatums,
  createTrainingService,
  reduceMetrics,
} from "../../../src/services/training/index.js";
import { estimateDatumBytes } from "../../../src/services/training/tinker/chunks.js";
import { LossInputError } from "../../../src/types/losses.js";
import { adamParams, datum } from "../../../src/types/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tempDir, tokens } from "./helpers.js";

const DATUMS = ["a", "bb", "ccc", "dddd", "eeeee"].map((t) => sftDatum(`word ${t}`));

async function tinker(options: Parameters<typeof serve>[0] = {}) {
  const server = await serve({ protocol: "tinker", ...options });
  const svc = new TinkerTrainingService({ baseUrl: server.url, apiKey: API_KEY, ...FAST });
  onCleanup(() => svc.close());
  return { server, svc };
}

describe("tinker chunking", () => {
  it("splits a large forward_backward into chunks with consecutive seq_ids and recombines the outputs in order", async () => {
    const { server, svc } = await tinker({ tinkerClientConfig: { fwdbwd_max_chunk_len: 2 } });
    const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const whole = await (await client.forward(DATUMS.slice(0, 1), "cross_entropy")).result();
    const chunked = await (await client.forwardBackward(DATUMS, "cross_entropy")).result();
    const step = await (await client.optimStep(adamParams({ learning_rate: 1e-3 }))).result();
    const submits = server.requests.filter((r) => r.path === "/api/v1/forward_backward").map((r) => r.body as { seq_id: number; forward_backward_input: { data: unknown[] } });
    expect(submits.map((b) => b.seq_id).sort()).toEqual([2, 3, 4]);
    expect(submits.sort((a, b) => a.seq_id - b.seq_id).map((b) => b.forward_backward_input.data.length)).toEqual([2, 2, 1]);
    expect(step.metrics["step:max"]).toBe(1);
    expect((server.requests.find((r) => r.path === "/api/v1/optim_step")!.body as { seq_id: number }).seq_id).toBe(5);
    expect(chunked.lossFnOutputs.map((o) => o.logprobs.length)).toEqual(DATUMS.map((d) => d.loss_fn_inputs.target_tokens!.data.length));
    expect(chunked.lossFnOutputs[0]!.logprobs).toEqual(whole.lossFnOutputs[0]!.logprobs);
    const local = new LocalTrainingService({ outputDir: await tempDir() });
    const reference = await (await (await local.createTrainingClient({ baseModel: "tiny", seed: 1 })).forward(DATUMS, "cross_entropy")).result();
    expect(chunked.metrics["loss:sum"]).toBeCloseTo(reference.metrics["loss:sum"]!, 9);
  });

  it("starts a new chunk when the byte budget, estimated as the Tinker SDK does, is spent", () => {
    expect(estimateDatumBytes(DATUMS[4]!)).toBe(10 * 3 * DATUMS[4]!.loss_fn_inputs.target_tokens!.data.length);
    const size = estimateDatumBytes(DATUMS[4]!);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: size * 2 }).map((c) => c.length)).toEqual([2, 2, 1]);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: 1 }).map((c) => c.length)).toEqual([1, 1, 1, 1, 1]);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: 5_000_000 })).toEqual([DATUMS]);
  });

  it("reduces metrics by their name:reduction suffix, weighting means by datums per chunk", () => {
    const chunks: Array<Record<string, number>> = [
      { "loss:sum": 1, "acc:mean": 0.5, "lo:min": 3, "hi:max": 3, "s:slack": 1, "h:hash_unordered": 7, "u:unique": 1, "only:sum": 1, "x:weird": 1, plain: 2 },
      { "loss:sum": 2, "acc:mean": 1, "lo:min": 2, "hi:max": 5, "s:slack": 4, "h:hash_unordered": 9, "u:unique": 2, "x:weird": 1, plain: 5 },
    ];
    const out = reduceMetrics(chunks, [3, 1]);
    expect(out).toMatchObject({ "loss:sum": 3, "acc:mean": 0.625, "lo:min": 2, "hi:max": 5, "s:slack": 4 - 1.75, "u:unique": 1, "u:unique_2": 2, plain: 2.75 });
    expect(out).not.toHaveProperty("only:sum");
    expect(out).not.toHaveProperty("x:weird");
    expect(reduceMetrics([...chunks].reverse(), [1, 3])["h:hash_unordered"]).toBe(out["h:hash_unordered"]);
  });
});

describe("tinker client", () => {
  it("checks datums before sending, drops client-only mask keys, and burns no seq_id on a bad call", async () => {
    const { server, svc } = await tinker();
    const client = await svc.createTrainingClient({ baseModel: "tiny" });
    const t = tokens("abc");
    const missingWeights = datum(t.slice(0, -1), { target_tokens: t.slice(1) });
    await expect(client.forwardBackward([missingWeights], "cross_entropy")).rejects.toThrow(LossInputError);
    await expect(client.forwardBackward([], "cross_entropy")).rejects.toThrow(/no datums/);
    await expect(client.forwardBackward([sftDatum("x")], "cross_entropy", { beta: 1 })).rejects.toThrow(/loss_fn_config key "beta"/);
    expect(server.requests.filter((r) => r.path === "/api/v1/forward_backward")).toHaveLength(0);
    const masked = datum(t.slice(0, -1), { target_tokens: t.slice(1), weights: [1, 1, 1, 1], mask: [1, 1, 1, 1], loss_mask: [1, 1, 1, 1] });
    await (await client.forwardBackward([masked], "cross_entropy")).result();
    const sent = server.requests.find((r) => r.path === "/api/v1/forward_backward")!.body as { seq_id: number; forward_backward_input: { data: Array<{ loss_fn_inputs: object }> } };
    expect(sent.seq_id).toBe(1);
    expect(Object.keys(sent.forward_backward_input.data[0]!.loss_fn_inputs).sort()).toEqual(["target_tokens", "weights"]);
  });

  it("refuses full fine-tuning, which Tinker does not offer", async () => {
    const { svc } = await tinker();
    await expect(svc.createTrainingClient({ baseModel: "tiny", trainingMode: "full_ft" })).rejects.toThrow(UnsupportedTrainingModeError);
  });

  it("scores a sequence that fills the whole context", async () => {
    const { svc } = await tinker();
    const sampler = await svc.createSamplingClient("tiny");
    const full = Array.from({ length: 128 }, (_, i) => 65 + (i % 26));
    const scored = await sampler.computeLogprobs(full);
    expect(scored).toHaveLength(128);
    expect(scored.slice(1).every((lp) => typeof lp === "number" && lp < 0)).toBe(true);
  });

  it("keeps polling a long-running future across long-poll timeouts", async () => {
    const { server, svc } = await tinker({ longPollTimeoutMs: 1 });
    const client = await svc.createTrainingClient({ baseModel: "tiny" });
    const big = Array.from({ length: 64 }, (_, i) => sftDatum(`${"x".repeat(100)}${i}`));
    const result = await (await client.forwardBackward(big, "cross_entropy")).result();
    expect(result.lossFnOutputs).toHaveLength(64);
    expect(server.requests.filter((r) => r.path === "/api/v1/retrieve_future").length).toBeGreaterThanOrEqual(2);
  });
});

describe("createTrainingService", () => {
  it("reads the key and base URL from the environment, and says which variable is missing", async () => {
    const server = await serve({ protocol: "tinker", apiKey: API_KEY });
    const svc = createTrainingService("tinker", { env: { TINKER_API_KEY: API_KEY, TINKER_BASE_URL: server.url }, ...FAST });
    onCleanup(() => svc.close());
    expect((await svc.createTrainingClient({ baseModel: "tiny" })).modelId).toMatch(/:train:0$/);
    expect(() => createTrainingService("tinker", { env: {} })).toThrow(MissingApiKeyError);
    expect(() => createTrainingService("weaver", { env: {} })).toThrow(/set WEAVER_API_KEY or pass apiKey/);
  });

  it("builds the local backend from an output folder and rejects unknown backends", () => {
    expect(createTrainingService("local", { outputDir: "out" })).toBeInstanceOf(LocalTrainingService);
    expect(() => createTrainingService("local")).toThrow(TrainingServiceConfigError);
    expect(() => createTrainingService("cloud" as "local", {})).toThrow(/unknown training backend "cloud"/);
  });
});
