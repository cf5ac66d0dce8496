import { describe, expect, it } from "vitest";
import type { CapturedRequest, ServerOptions } from "../../../src/server/index.js";
import { TinkerTrainingService, type TinkerWire } from "../../../src/backends/index.js";
import { negotiate, resolveWire } from "../../../src/backends/tinker/generation.js";
import { zstdDecompress } from "../../../src/wire/tinker-proto/zstd.js";
import { adamParams, datum, modelInputFromTokens, type Datum } from "../../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, serve, sftDatum, tokens } from "../../support/training.js";
import { proxy } from "./proxy.js";
import {
  all,
  double,
  leArray,
  mapEntries,
  one,
  packedVarints,
  readFields,
  text,
  toBf16,
} from "../../support/protowire.js";
import { ConfigError, InputError } from "../../../src/errors.js";

const DATUMS = [sftDatum("the cat"), sftDatum("sat on the mat")];

/** A PPO datum: targets, sampling logprobs and advantages over `text`. */
function ppoDatum(text: string): Datum {
  const t = tokens(text);
  const n = t.length - 1;
  return datum(t.slice(0, -1), {
    target_tokens: t.slice(1),
    logprobs: Array.from({ length: n }, (_, i) => -1 - i / 8),
    advantages: Array.from({ length: n }, (_, i) => (i % 3) - 1),
  });
}

async function client(wire: TinkerWire | undefined, options: Partial<ServerOptions> = {}, baseUrl?: string) {
  const server = await serve({ protocol: "tinker", ...options });
  const svc = new TinkerTrainingService({
    baseUrl: baseUrl ?? server.url,
    apiKey: API_KEY,
    ...FAST,
    env: {},
    ...(wire && { wire }),
  });
  onCleanup(() => svc.close());
  return { server, svc };
}

/** Trains, saves and samples; everything a run needs of the service, with its numbers. */
async function exercise(svc: TinkerTrainingService) {
  const training = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
  const forward = await (await training.forward(DATUMS, "cross_entropy")).result();
  const trained = await (await training.forwardBackward(DATUMS, "cross_entropy")).result();
  const step = await (await training.optimStep(adamParams({ learningRate: 0.01 }))).result();
  const ppo = await (await training.forwardBackward([ppoDatum("abc")], "ppo", { clip_low_threshold: 0.7 })).result();
  const checkpoint = await (await training.saveState("c1", { kind: "weights_and_optimizer" })).result();
  const snapshot = await (await training.saveWeightsForSampler("s1")).result();
  const sampler = await svc.createSamplingClient(snapshot.path);
  const sampled = await (
    await sampler.sample(modelInputFromTokens(tokens("the").slice(0, -1)), 2, { maxTokens: 5, seed: 3 })
  ).result();
  const scored = await sampler.computeLogprobs(tokens("the cat"));
  return { forward, trained, step, ppo, checkpoint: checkpoint.path, sampled, scored };
}

/** `value` with every number of an array rounded to float32 (as protobuf results carry them). */
function float32<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => (typeof v === "number" ? Math.fround(v) : float32(v))) as T;
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, float32(v)])) as T;
  return value;
}

const paths = (requests: CapturedRequest[]) => requests.map((r) => r.path.replace("/api/v1/", ""));
const polls = (requests: CapturedRequest[]) => requests.filter((r) => r.path === "/api/v1/retrieve_future");

describe("tinker wire generations", () => {
  it("train, sample and save with the same numbers in every generation, each speaking its own wire", async () => {
    const json = await client("json");
    const baseline = await exercise(json.svc);
    expect((await json.svc.negotiated()).sdkVersion).toBe("0.18.2");
    expect(paths(json.server.requests)).toContain("forward");
    expect(json.server.requests.every((r) => r.headers["content-type"] !== "application/x-protobuf")).toBe(true);
    expect(json.server.requests.find((r) => r.path.endsWith("client/config"))!.body).toEqual({ sdk_version: "0.18.2" });

    const cases: Array<[string, TinkerWire | undefined, Partial<ServerOptions>, string, boolean]> = [
      ["auto, server default flags", undefined, {}, "0.24.1", false],
      [
        "auto, server asks for protobuf",
        "auto",
        { tinkerClientConfig: { proto_write_fwdbwd: true, fwd_via_fwdbwd: true } },
        "0.24.1",
        true,
      ],
      ["protobuf", "protobuf", {}, "0.25.0", true],
    ];
    for (const [name, wire, options, sdkVersion, protobuf] of cases) {
      const { server, svc } = await client(wire, options);
      const result = await exercise(svc);
      expect({ ...result, checkpoint: "" }, name).toEqual({ ...baseline, checkpoint: "" });
      const negotiation = await svc.negotiated();
      expect([negotiation.sdkVersion, negotiation.forwardBackward, negotiation.forward], name).toEqual([
        sdkVersion,
        protobuf ? "protobuf" : "json",
        protobuf ? "forward_only" : "json",
      ]);
      const lossCalls = server.requests.filter(
        (r) => r.path === "/api/v1/forward_backward" || r.path === "/api/v1/forward",
      );
      expect(
        lossCalls.map((r) => [r.path.replace("/api/v1/", ""), r.headers["content-type"], (r.body as any).forward_only]),
        name,
      ).toEqual(
        protobuf
          ? [
              ["forward_backward", "application/x-protobuf", true],
              ["forward_backward", "application/x-protobuf", false],
              ["forward_backward", "application/x-protobuf", false],
            ]
          : [
              ["forward", "application/json", undefined],
              ["forward_backward", "application/json", undefined],
              ["forward_backward", "application/json", undefined],
            ],
      );
      // Polls for sample and forward_backward results ask for protobuf (0.25 accepts nothing else,
      // earlier SDKs take either); the others take JSON.
      const accepts = new Set(polls(server.requests).map((r) => r.headers.accept));
      expect([...accepts].sort(), name).toEqual(
        [
          "application/json",
          wire === "protobuf" ? "application/x-protobuf" : "application/x-protobuf, application/json",
        ].sort(),
      );
    }
  });

  it("reads JSON results when the server answers JSON, whatever it asked for", async () => {
    const server = await serve({ protocol: "tinker" });
    const types: string[] = [];
    // A server that predates protobuf results: it ignores Accept and answers JSON.
    const url = await proxy(
      server.url,
      (request) => {
        if (request.path === "/api/v1/retrieve_future") request.headers.accept = "application/json";
        return undefined;
      },
      (request, answer) => {
        if (request.path === "/api/v1/retrieve_future") types.push(answer.contentType);
      },
    );
    const { svc } = await client("protobuf", {}, url);
    const viaJson = await exercise(svc);
    expect(types.length).toBeGreaterThan(0);
    expect(types.every((t) => t.startsWith("application/json"))).toBe(true);
    const { svc: direct } = await client("protobuf");
    // JSON carries the engine's float64 values, protobuf their float32 rounding.
    expect(float32({ ...viaJson, checkpoint: "" })).toEqual({ ...(await exercise(direct)), checkpoint: "" });
    expect(float32(viaJson)).not.toEqual(viaJson);
  });

  it("reads bfloat16 results, each value the float32 result rounded to bfloat16", async () => {
    const { svc: plain } = await client("protobuf");
    const expected = await (
      await (await plain.createTrainingClient({ baseModel: "tiny", seed: 1 })).forward(DATUMS, "cross_entropy")
    ).result();
    const { server, svc } = await client("protobuf", { tinkerResultDtype: "bfloat16" });
    const training = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const got = await (await training.forward(DATUMS, "cross_entropy")).result();
    const want = expected.lossFnOutputs.map((o) => o.logprobs.map(toBf16));
    expect(got.lossFnOutputs.map((o) => o.logprobs)).toEqual(want);
    expect(want.flat().some((v, i) => v !== expected.lossFnOutputs.flatMap((o) => o.logprobs)[i])).toBe(true);
    expect(got.metrics["loss:sum"]).toBe(expected.metrics["loss:sum"]);
    expect(server.requests.some((r) => r.path === "/api/v1/retrieve_future")).toBe(true);
  });

  it("writes forward_backward as the SDK's ForwardBackwardRequest, field by field (read back by a reader of its own)", async () => {
    const { server, svc } = await client("protobuf");
    const training = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const data = [ppoDatum("ab"), ppoDatum("xyz")];
    await (
      await training.forwardBackward(data, "ppo", { clip_low_threshold: 0.7, clip_high_threshold: 1.25 })
    ).result();
    await (await training.forward([sftDatum("q")], "cross_entropy")).result();
    const [fwdbwd, fwd] = server.requests
      .filter((r) => r.path === "/api/v1/forward_backward")
      .map((r) => readFields(r.rawBody!));
    expect(fwdbwd!.map((f) => f.field).sort()).toEqual([1, 2, 3, 3, 4, 5, 5]);
    expect(text(one(fwdbwd!, 1))).toBe(training.modelId);
    expect(one(fwdbwd!, 2)!.varint).toBe(1n);
    expect(text(one(fwdbwd!, 4))).toBe("ppo");
    expect(Object.fromEntries(mapEntries(fwdbwd!, 5).map(([k, v]) => [k, double(v)]))).toEqual({
      clip_low_threshold: 0.7,
      clip_high_threshold: 1.25,
    });
    expect(one(fwdbwd!, 6)).toBeUndefined(); // forward_only false: proto3 leaves it out
    all(fwdbwd!, 3).forEach((field, i) => {
      const d = readFields(field.bytes!);
      const chunks = all(d, 1).map((c) => readFields(c.bytes!));
      expect(chunks).toHaveLength(1);
      const encodedText = readFields(one(chunks[0]!, 1)!.bytes!);
      expect(leArray(one(encodedText, 1)!.bytes!, "i32")).toEqual(
        data[i]!.model_input.chunks[0]!.type === "encoded_text" &&
          (data[i]!.model_input.chunks[0] as { tokens: number[] }).tokens,
      );
      const inputs = Object.fromEntries(mapEntries(d, 2).map(([k, v]) => [k, readFields(v.bytes!)]));
      expect(Object.keys(inputs).sort()).toEqual(["advantages", "logprobs", "target_tokens"]);
      for (const [key, tensor] of Object.entries(inputs)) {
        const source = data[i]!.loss_fn_inputs[key]!;
        const int = key === "target_tokens";
        expect(one(tensor, 3)!.varint, key).toBe(int ? 2n : 1n); // DTYPE_INT64 / DTYPE_FLOAT32
        expect(packedVarints(one(tensor, 4)), key).toEqual([source.data.length]);
        expect(leArray(one(tensor, 1)!.bytes!, int ? "i64" : "f32"), key).toEqual(
          source.data.map((v) => (int ? v : Math.fround(v))),
        );
        expect(one(tensor, 2), key).toBeUndefined();
      }
    });
    expect(one(fwd!, 6)!.varint).toBe(1n);
    expect(one(fwd!, 2)!.varint).toBe(2n);
  });

  it("zstd-compresses protobuf bodies when the server sets proto_compress_fwdbwd", async () => {
    const { server, svc } = await client("protobuf", { tinkerClientConfig: { proto_compress_fwdbwd: true } });
    expect((await svc.negotiated()).compressed).toBe(true);
    const training = await svc.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const long = [sftDatum("the cat sat on the mat ".repeat(4))];
    const result = await (await training.forwardBackward(long, "cross_entropy")).result();
    const sent = server.requests.find((r) => r.path === "/api/v1/forward_backward")!;
    expect(sent.headers["content-encoding"]).toBe("zstd");
    expect([...sent.rawBody!.subarray(0, 4)]).toEqual([0x28, 0xb5, 0x2f, 0xfd]); // a zstd frame
    const plain = await zstdDecompress(sent.rawBody!, 1 << 20);
    expect(plain.length).toBeGreaterThan(sent.rawBody!.length);
    const tokensSent = readFields(readFields(readFields(one(readFields(plain), 3)!.bytes!)[0]!.bytes!)[0]!.bytes!);
    expect(leArray(one(tokensSent, 1)!.bytes!, "i32")).toEqual(
      (long[0]!.model_input.chunks[0] as { tokens: number[] }).tokens,
    );
    expect(result.lossFnOutputs[0]!.logprobs).toHaveLength(long[0]!.loss_fn_inputs.target_tokens!.data.length);
  });

  it("submits chunks one after another unless the server sets parallel_fwdbwd_chunks, and sizes them as the SDK of the wire does", async () => {
    const three = [sftDatum("a"), sftDatum("bb"), sftDatum("ccc")];
    const order = async (parallel: boolean) => {
      const { server, svc } = await client("protobuf", {
        tinkerClientConfig: { parallel_fwdbwd_chunks: parallel, fwdbwd_max_chunk_len: 1 },
      });
      const training = await svc.createTrainingClient({ baseModel: "tiny" });
      const result = await (await training.forwardBackward(three, "cross_entropy")).result();
      expect(result.lossFnOutputs.map((o) => o.logprobs.length)).toEqual([2, 3, 4]);
      return server.requests.filter((r) => r.path === "/api/v1/forward_backward").map((r) => (r.body as any).seq_id);
    };
    expect(await order(false)).toEqual([1, 2, 3]);
    expect((await order(true)).at(-1)).toBe(1); // the first chunk goes last
    // Protobuf estimate: 4 bytes a token, 8 an int64 target, 4 a float32 weight: 16 per position.
    const { server, svc } = await client("protobuf", { tinkerClientConfig: { fwdbwd_max_chunk_bytes_count: 16 * 5 } });
    const training = await svc.createTrainingClient({ baseModel: "tiny" });
    await (await training.forwardBackward(three, "cross_entropy")).result(); // 2, 3 and 4 positions
    const sizes = server.requests
      .filter((r) => r.path === "/api/v1/forward_backward")
      .map((r) => (r.body as any).forward_backward_input.data.length)
      .sort();
    expect(sizes).toEqual([1, 2]);
  });

  it("keeps at most sample_max_concurrent_requests samples in flight per sampling client", async () => {
    const peak = async (limit: number | undefined) => {
      const server = await serve({
        protocol: "tinker",
        ...(limit !== undefined && { tinkerClientConfig: { sample_max_concurrent_requests: limit } }),
      });
      const open = new Set<string>();
      let most = 0;
      const url = await proxy(server.url, undefined, (request, answer) => {
        if (request.path === "/api/v1/asample") {
          open.add(JSON.parse(answer.body.toString()).request_id);
          most = Math.max(most, open.size);
        } else if (request.path === "/api/v1/retrieve_future" && answer.contentType.includes("protobuf")) {
          open.delete(JSON.parse(request.body.toString()).request_id);
        }
      });
      const { svc } = await client("protobuf", {}, url);
      const sampler = await svc.createSamplingClient("tiny");
      const futures = await Promise.all(
        [1, 2, 3, 4].map((seed) => sampler.sample(modelInputFromTokens([256, 97]), 1, { maxTokens: 3, seed })),
      );
      const results = await Promise.all(futures.map((f) => f.result()));
      expect(results.map((r) => r.sequences[0]!.tokens.length)).toEqual([3, 3, 3, 3]);
      return most;
    };
    expect(await peak(1)).toBe(1);
    expect(await peak(undefined)).toBeGreaterThan(1);
  });

  it("refuses what the protobuf generation cannot carry before sending anything", async () => {
    const { server, svc } = await client("protobuf");
    const training = await svc.createTrainingClient({ baseModel: "tiny" });
    const pointer: Datum = {
      model_input: {
        chunks: [{ type: "image_asset_pointer", location: "s3://x.png", format: "png", expected_tokens: 1 }],
      },
      loss_fn_inputs: { target_tokens: { data: [1], dtype: "int64" }, weights: { data: [1], dtype: "float32" } },
    };
    await expect(training.forwardBackward([pointer], "cross_entropy")).rejects.toThrow(InputError);
    await expect(training.forwardBackward([pointer], "cross_entropy")).rejects.toThrow(/wire: json/);
    expect(server.requests.filter((r) => r.path === "/api/v1/forward_backward")).toHaveLength(0);
  });
});

describe("choosing the wire", () => {
  it("takes the option, else NEXRL_TINKER_WIRE, else auto, and names the bad value", () => {
    expect(resolveWire(undefined, {})).toBe("auto");
    expect(resolveWire(undefined, { NEXRL_TINKER_WIRE: "json" })).toBe("json");
    expect(resolveWire("protobuf", { NEXRL_TINKER_WIRE: "json" })).toBe("protobuf");
    expect(() => resolveWire(undefined, { NEXRL_TINKER_WIRE: "grpc" })).toThrow(
      /NEXRL_TINKER_WIRE is "grpc"; use one of auto, json, protobuf/,
    );
    expect(() => new TinkerTrainingService({ apiKey: API_KEY, wire: "xml" as TinkerWire })).toThrow(ConfigError);
  });

  it("follows the rules of the SDK release each wire announces", () => {
    const rules = (wire: TinkerWire, flags: Record<string, unknown>) => {
      const n = negotiate(wire, flags);
      return [n.sdkVersion, n.forwardBackward, n.forward, n.compressed, n.flags.parallel_fwdbwd_chunks];
    };
    const compress = { proto_compress_fwdbwd: true };
    expect(rules("json", { proto_write_fwdbwd: true, fwd_via_fwdbwd: true, ...compress })).toEqual([
      "0.18.2",
      "json",
      "json",
      false,
      false,
    ]);
    expect(rules("auto", compress)).toEqual(["0.24.1", "json", "json", false, true]);
    expect(rules("auto", { proto_write_fwdbwd: true, ...compress })).toEqual([
      "0.24.1",
      "protobuf",
      "json",
      true,
      true,
    ]);
    expect(rules("auto", { proto_write_fwdbwd: true, fwd_via_fwdbwd: true })).toEqual([
      "0.24.1",
      "protobuf",
      "forward_only",
      false,
      true,
    ]);
    expect(rules("protobuf", { parallel_fwdbwd_chunks: false })).toEqual([
      "0.25.0",
      "protobuf",
      "forward_only",
      false,
      false,
    ]);
    expect(rules("protobuf", compress)).toEqual(["0.25.0", "protobuf", "forward_only", true, true]);
    // Flags of the wrong type are the defaults.
    expect(
      negotiate("protobuf", { sample_max_concurrent_requests: "3", billing_exception_max_pause_duration_sec: -1 })
        .flags,
    ).toMatchObject({
      sample_max_concurrent_requests: 2000,
      billing_exception_max_pause_duration_sec: 3600,
    });
  });
});
