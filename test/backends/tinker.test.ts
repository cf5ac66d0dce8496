import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { HttpTransport, type HttpRequest } from "../../src/http/transport.js";
import { trajectoryToDatum } from "../../src/algorithms/datums.js";
import {
  LocalTrainingService,
  TinkerTrainingService,
  chunkDatums,
  createTrainingService,
  reduceMetrics,
} from "../../src/backends/index.js";
import { DEFAULT_CHUNK_LIMITS, estimateDatumBytes } from "../../src/backends/tinker/chunks.js";
import { negotiate } from "../../src/backends/tinker/generation.js";
import { TinkerTrainingClient } from "../../src/backends/tinker/training-client.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { adamParams, datum, modelInputFromTokens } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tempDir, tokens } from "../support/training.js";
import { ConfigError, InputError } from "../../src/errors.js";

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
    const step = await (await client.optimStep(adamParams({ learningRate: 1e-3 }))).result();
    const submits = server.requests
      .filter((r) => r.path === "/api/v1/forward_backward")
      .map((r) => r.body as { seq_id: number; forward_backward_input: { data: unknown[] } });
    expect(submits.map((b) => b.seq_id).sort()).toEqual([2, 3, 4]);
    expect(submits.sort((a, b) => a.seq_id - b.seq_id).map((b) => b.forward_backward_input.data.length)).toEqual([
      2, 2, 1,
    ]);
    expect(step.metrics["step:max"]).toBe(1);
    expect((server.requests.find((r) => r.path === "/api/v1/optim_step")!.body as { seq_id: number }).seq_id).toBe(5);
    expect(chunked.lossFnOutputs.map((o) => o.logprobs.length)).toEqual(
      DATUMS.map((d) => d.loss_fn_inputs.target_tokens!.data.length),
    );
    expect(chunked.lossFnOutputs[0]!.logprobs).toEqual(whole.lossFnOutputs[0]!.logprobs);
    const local = new LocalTrainingService({ outputDir: await tempDir() });
    const reference = await (
      await (await local.createTrainingClient({ baseModel: "tiny", seed: 1 })).forward(DATUMS, "cross_entropy")
    ).result();
    expect(chunked.metrics["loss:sum"]).toBeCloseTo(reference.metrics["loss:sum"]!, 9);
  });

  it("starts a new chunk when the byte budget, estimated as the Tinker SDK does, is spent", () => {
    expect(estimateDatumBytes(DATUMS[4]!)).toBe(10 * 3 * DATUMS[4]!.loss_fn_inputs.target_tokens!.data.length);
    const size = estimateDatumBytes(DATUMS[4]!);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: size * 2 }).map((c) => c.length)).toEqual([2, 2, 1]);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: 1 }).map((c) => c.length)).toEqual([1, 1, 1, 1, 1]);
    expect(chunkDatums(DATUMS, { maxDatums: 1024, maxBytes: 5_000_000 })).toEqual([DATUMS]);
  });

  it("chunks datums of trajectories by the byte estimate", async () => {
    const { server, svc } = await tinker({ tinkerClientConfig: { fwdbwd_max_chunk_bytes_count: 240 } });
    const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const lengths = [5, 3, 4, 6, 2];
    const datums = lengths.map((n) =>
      trajectoryToDatum(
        new Trajectory({ tokens: tokens("xyzw".slice(0, n - 2)), lossMask: Array(n).fill(1), reward: 1 }),
        { lossFn: "cross_entropy", backend: "tinker" },
      )!,
    );
    // Estimates of 10 bytes per value, 3 arrays of n - 1 values: 120, 60, 90, 150, 30 against a budget of 240.
    const result = await (await client.forwardBackward(datums, "cross_entropy")).result();
    const submits = server.requests
      .filter((r) => r.path === "/api/v1/forward_backward")
      .map((r) => r.body as { seq_id: number; forward_backward_input: { data: unknown[] } });
    expect(
      submits.sort((a, b) => a.seq_id - b.seq_id).map((b) => [b.seq_id, b.forward_backward_input.data.length]),
    ).toEqual([
      [1, 2],
      [2, 2],
      [3, 1],
    ]);
    expect(result.lossFnOutputs.map((o) => o.logprobs.length)).toEqual(lengths.map((n) => n - 1));
  });

  it("reduces metrics by their name:reduction suffix, weighting means by datums per chunk", () => {
    const chunks: Array<Record<string, number>> = [
      {
        "loss:sum": 1,
        "acc:mean": 0.5,
        "lo:min": 3,
        "hi:max": 3,
        "s:slack": 1,
        "h:hash_unordered": 7,
        "u:unique": 1,
        "only:sum": 1,
        "x:weird": 1,
        plain: 2,
      },
      {
        "loss:sum": 2,
        "acc:mean": 1,
        "lo:min": 2,
        "hi:max": 5,
        "s:slack": 4,
        "h:hash_unordered": 9,
        "u:unique": 2,
        "x:weird": 1,
        plain: 5,
      },
    ];
    const out = reduceMetrics(chunks, [3, 1]);
    expect(out).toMatchObject({
      "loss:sum": 3,
      "acc:mean": 0.625,
      "lo:min": 2,
      "hi:max": 5,
      "s:slack": 4 - 1.75,
      "u:unique": 1,
      "u:unique_2": 2,
      plain: 2.75,
    });
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
    await expect(client.forwardBackward([missingWeights], "cross_entropy")).rejects.toThrow(InputError);
    await expect(client.forwardBackward([], "cross_entropy")).rejects.toThrow(/no datums/);
    await expect(client.forwardBackward([sftDatum("x")], "cross_entropy", { beta: 1 })).rejects.toThrow(
      /loss_fn_config key "beta"/,
    );
    expect(server.requests.filter((r) => r.path === "/api/v1/forward_backward")).toHaveLength(0);
    const masked = datum(t.slice(0, -1), {
      target_tokens: t.slice(1),
      weights: [1, 1, 1, 1],
      mask: [1, 1, 1, 1],
      loss_mask: [1, 1, 1, 1],
    });
    await (await client.forwardBackward([masked], "cross_entropy")).result();
    const sent = server.requests.find((r) => r.path === "/api/v1/forward_backward")!.body as {
      seq_id: number;
      forward_backward_input: { data: Array<{ loss_fn_inputs: object }> };
    };
    expect(sent.seq_id).toBe(1);
    expect(Object.keys(sent.forward_backward_input.data[0]!.loss_fn_inputs).sort()).toEqual([
      "target_tokens",
      "weights",
    ]);
  });

  it("refuses full fine-tuning, which Tinker does not offer", async () => {
    const { svc } = await tinker();
    await expect(svc.createTrainingClient({ baseModel: "tiny", trainingMode: "full_ft" })).rejects.toThrow(ConfigError);
  });

  it("scores a sequence that fills the whole context", async () => {
    const { svc } = await tinker();
    const sampler = await svc.createSamplingClient("tiny");
    const full = Array.from({ length: 128 }, (_, i) => 65 + (i % 26));
    const scored = await sampler.computeLogprobs(full);
    expect(scored).toHaveLength(128);
    expect(scored.slice(1).every((lp) => typeof lp === "number" && lp < 0)).toBe(true);
  });

  it("sends stop strings or stop ids, and refuses both kinds in one list before sending", async () => {
    const { server, svc } = await tinker();
    const sampler = await svc.createSamplingClient("tiny");
    const prompt = modelInputFromTokens(tokens("ab"));
    const sampled = await (await sampler.sample(prompt, 1, { maxTokens: 3, seed: 1, stop: [10, 11] })).result();
    expect(sampled.sequences[0]!.tokens.length).toBeGreaterThan(0);
    const sent = server.requests.filter((r) => r.path === "/api/v1/asample");
    expect((sent[0]!.body as { sampling_params: { stop: unknown } }).sampling_params.stop).toEqual([10, 11]);
    await expect(sampler.sample(prompt, 1, { maxTokens: 3, stop: ["\n", 10] })).rejects.toThrow(
      /stop strings or stop token ids, not both/,
    );
    expect(server.requests.filter((r) => r.path === "/api/v1/asample")).toHaveLength(1);
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
    const svc = createTrainingService("tinker", {
      env: { TINKER_API_KEY: API_KEY, TINKER_BASE_URL: server.url },
      ...FAST,
    });
    onCleanup(() => svc.close());
    expect((await svc.createTrainingClient({ baseModel: "tiny" })).modelId).toMatch(/:train:0$/);
    expect(() => createTrainingService("tinker", { env: {} })).toThrow(ConfigError);
    expect(() => createTrainingService("weaver", { env: {} })).toThrow(/set WEAVER_API_KEY or pass apiKey/);
  });

  it("builds the local backend from an output folder and rejects unknown backends", () => {
    expect(createTrainingService("local", { outputDir: "out" })).toBeInstanceOf(LocalTrainingService);
    expect(() => createTrainingService("local")).toThrow(ConfigError);
    expect(() => createTrainingService("cloud" as "local", {})).toThrow(/unknown training backend "cloud"/);
  });
});

describe("tinker submissions", () => {
  it("send the same bytes on a retry and on a resubmission after 410, the documented JSON", async () => {
    // A Tinker service that fails the first submission with 503 and the first poll with 410.
    const submissions: Buffer[] = [];
    let polls = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const answer = (status: number, body: unknown): void => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(JSON.stringify(body));
        };
        if (req.url === "/api/v1/forward_backward") {
          submissions.push(Buffer.concat(chunks));
          return submissions.length === 1
            ? answer(503, { error: "busy" })
            : answer(200, { request_id: `r${submissions.length}` });
        }
        if (++polls === 1) return answer(410, { error: "expired" });
        answer(200, {
          loss_fn_outputs: [{ logprobs: { data: [-1, -2], dtype: "float32" } }],
          metrics: { "loss:sum": 3 },
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onCleanup(() => new Promise((resolve) => server.close(resolve)));
    const http = new HttpTransport({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apiKey: API_KEY,
      backoff: { initialDelayMs: 1, maxDelayMs: 2 },
    });
    onCleanup(() => http.close());
    const closed = new AbortController();
    const ctx = {
      http,
      sessionId: "s",
      limits: DEFAULT_CHUNK_LIMITS,
      pollTimeoutMs: 5000,
      maxRetries: 3,
      backoff: { initialDelayMs: 1, maxDelayMs: 2 },
      closed: closed.signal,
      log: undefined,
      negotiation: negotiate("json", {}),
      request: <T>(r: HttpRequest) => http.request<T>(r),
    };
    const client = new TinkerTrainingClient(ctx, "s:train:0", "tiny");
    const t = new Trajectory({
      tokens: [7, 8, 9],
      lossMask: [0, 1, 1],
      logprobs: [0, Math.fround(-0.1), -0],
      reward: 1,
      advantage: 0.1 + 0.2,
    });
    const d = trajectoryToDatum(t, { lossFn: "importance_sampling", backend: "tinker" })!;
    const result = await (await client.forwardBackward([d], "importance_sampling")).result();
    expect(result.metrics["loss:sum"]).toBe(3);
    const expected = JSON.stringify({
      forward_backward_input: {
        data: [
          {
            model_input: { chunks: [{ type: "encoded_text", tokens: [7, 8] }] },
            loss_fn_inputs: {
              target_tokens: { data: [8, 9], dtype: "int64", shape: [2] },
              logprobs: { data: [Math.fround(-0.1), -0], dtype: "float32", shape: [2] },
              advantages: { data: [0.1 + 0.2, 0.1 + 0.2], dtype: "float32", shape: [2] },
            },
          },
        ],
        loss_fn: "importance_sampling",
      },
      model_id: "s:train:0",
      seq_id: 1,
    });
    expect(submissions.map((b) => b.toString("utf8"))).toEqual([expected, expected, expected]);
  });
});
