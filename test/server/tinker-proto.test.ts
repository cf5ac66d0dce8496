import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { all, double, le, leArray, mapEntries, one, readFields, text, Writer } from "../support/protowire.js";
import { ADAM, call, server, tinkerDatum, tokens } from "../support/server.js";

// Bodies written as the Tinker SDK 0.25.0 writes them (proto/request_conv.py,
// forward_backward_request_to_proto and resources/training.py), with the test's own writer.

interface SdkDatum {
  tokens: number[];
  inputs: Record<string, { data: number[]; dtype: "int64" | "float32"; shape?: number[] }>;
}

/** `_tensor_data_to_proto`: dtype, then shape if set, then the dense bytes in the declared dtype. */
function tensor(t: SdkDatum["inputs"][string]): Writer {
  const w = new Writer().varint(3, t.dtype === "float32" ? 1 : 2);
  if (t.shape) w.packed(4, t.shape);
  return w.bytes(1, le(t.data, t.dtype === "float32" ? "f32" : "i64"));
}

/** `forward_backward_request_to_proto` + `forward_only`, serialised. */
function sdkBody(
  modelId: string,
  seqId: number,
  data: SdkDatum[],
  lossFn: string,
  config: Record<string, number> | undefined,
  forwardOnly: boolean,
): Uint8Array {
  const w = new Writer().bytes(1, modelId).varint(2, seqId).bytes(4, lossFn);
  for (const [k, v] of Object.entries(config ?? {})) w.bytes(5, new Writer().bytes(1, k).double(2, v));
  for (const d of data) {
    const datum = new Writer().bytes(1, new Writer().bytes(1, new Writer().bytes(1, le(d.tokens, "i32"))));
    for (const [name, t] of Object.entries(d.inputs)) datum.bytes(2, new Writer().bytes(1, name).bytes(2, tensor(t)));
    w.bytes(3, datum);
  }
  if (forwardOnly) w.varint(6, true);
  return w.finish();
}

function sftData(...texts: string[]): SdkDatum[] {
  return texts.map((t) => {
    const ids = tokens(t);
    const n = ids.length - 1;
    return {
      tokens: ids.slice(0, -1),
      inputs: {
        target_tokens: { data: ids.slice(1), dtype: "int64", shape: [n] },
        weights: { data: Array(n).fill(1), dtype: "float32", shape: [n] },
      },
    };
  });
}

async function postProto(url: string, path: string, body: Uint8Array, headers: Record<string, string> = {}) {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/x-protobuf", ...headers },
    body,
  });
  return { status: response.status, body: (await response.json()) as any };
}

/** Polls until the answer is in; protobuf answers come back as their fields. */
async function retrieve(url: string, requestId: string, accept: string) {
  for (;;) {
    const response = await fetch(`${url}/api/v1/retrieve_future`, {
      method: "POST",
      headers: { "content-type": "application/json", accept },
      body: JSON.stringify({ request_id: requestId, allow_metadata_only: true }),
    });
    expect(response.status).toBe(200);
    const type = response.headers.get("content-type") ?? "";
    if (type === "application/x-protobuf")
      return { type, fields: readFields(new Uint8Array(await response.arrayBuffer())) };
    const json = (await response.json()) as any;
    if (json.type !== "try_again") return { type, json };
  }
}

/** `deserialize_forward_backward_output`, by the test's reader: per-datum logprobs and the metrics. */
function readOutput(fields: ReturnType<typeof readFields>) {
  const logprobs: number[][] = [];
  for (const record of all(fields, 2)) {
    const r = readFields(record.bytes!);
    const entries = mapEntries(r, 2);
    expect(entries.map(([name]) => name)).toEqual(["logprobs"]);
    const bt = readFields(entries[0]![1].bytes!);
    expect(one(bt, 3)!.varint).toBe(1n); // DTYPE_FLOAT32
    const data = leArray(one(bt, 1)!.bytes!, "f32");
    const offsets = leArray(one(bt, 2)!.bytes!, "i64");
    expect(offsets).toHaveLength(Number(one(r, 3)!.varint) + 1);
    for (let i = 0; i + 1 < offsets.length; i++) logprobs.push(data.slice(offsets[i]! / 4, offsets[i + 1]! / 4));
  }
  const metrics = Object.fromEntries(mapEntries(fields, 3).map(([k, v]) => [k, double(v)]));
  return { type: text(one(fields, 1)), logprobs, metrics };
}

async function model(url: string, seed = 1) {
  const { body } = await call(url, "POST", "/api/v1/create_session", {
    tags: [],
    user_metadata: {},
    sdk_version: "0.25.0",
    type: "create_session",
  });
  const created = await call(url, "POST", "/api/v1/create_model", {
    session_id: body.session_id,
    model_seq_id: seed,
    base_model: "tiny",
    lora_config: { rank: 8, seed, train_unembed: true, train_mlp: true, train_attn: true },
    type: "create_model",
  });
  await retrieve(url, created.body.request_id, "application/json");
  return { sessionId: body.session_id as string, modelId: created.body.model_id as string };
}

describe("the protobuf generation on nexrl serve (bodies as the SDK 0.25 writes them)", () => {
  it("trains on a protobuf forward_backward and answers protobuf results to polls that accept them", async () => {
    const { url } = await server({ protocol: "tinker" });
    const data = sftData("the cat", "sat");
    const proto = await model(url);
    const submitted = await postProto(
      url,
      "/api/v1/forward_backward",
      sdkBody(proto.modelId, 1, data, "cross_entropy", undefined, false),
    );
    expect(submitted.status).toBe(200);
    const answer = await retrieve(url, submitted.body.request_id, "application/x-protobuf");
    expect(answer.type).toBe("application/x-protobuf");
    const output = readOutput(answer.fields!);
    // The same datums in JSON, on a model made the same way.
    const json = await model(url);
    const viaJson = await call(url, "POST", "/api/v1/forward_backward", {
      forward_backward_input: { data: ["the cat", "sat"].map(tinkerDatum), loss_fn: "cross_entropy" },
      model_id: json.modelId,
      seq_id: 1,
    });
    const jsonAnswer = await retrieve(url, viaJson.body.request_id, "application/json");
    expect(jsonAnswer.type).toBe("application/json");
    expect(output.type).toBe("ArrayRecord");
    expect(output.logprobs).toEqual(jsonAnswer.json.loss_fn_outputs.map((o: any) => o.logprobs.data.map(Math.fround)));
    expect(output.metrics).toEqual(jsonAnswer.json.metrics);
    // Both models took the same gradients: the next step moves them alike.
    const stepProto = await call(url, "POST", "/api/v1/optim_step", {
      adam_params: ADAM,
      model_id: proto.modelId,
      seq_id: 2,
      type: "optim_step",
    });
    const stepJson = await call(url, "POST", "/api/v1/optim_step", {
      adam_params: ADAM,
      model_id: json.modelId,
      seq_id: 2,
      type: "optim_step",
    });
    expect((await retrieve(url, stepProto.body.request_id, "application/json")).json).toEqual(
      (await retrieve(url, stepJson.body.request_id, "application/json")).json,
    );
  });

  it("runs forward_only as a forward pass: no gradients accumulate", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await model(url);
    const data = sftData("abc");
    const before = await postProto(
      url,
      "/api/v1/forward_backward",
      sdkBody(modelId, 1, data, "cross_entropy", undefined, true),
    );
    const first = readOutput((await retrieve(url, before.body.request_id, "application/x-protobuf")).fields!);
    const step = await call(url, "POST", "/api/v1/optim_step", {
      adam_params: ADAM,
      model_id: modelId,
      seq_id: 2,
      type: "optim_step",
    });
    expect((await retrieve(url, step.body.request_id, "application/json")).json.metrics["grad_norm:mean"]).toBe(0);
    const after = await postProto(
      url,
      "/api/v1/forward_backward",
      sdkBody(modelId, 3, data, "cross_entropy", undefined, true),
    );
    expect(readOutput((await retrieve(url, after.body.request_id, "application/x-protobuf")).fields!).logprobs).toEqual(
      first.logprobs,
    );
  });

  it("reads zstd bodies (Content-Encoding: zstd), as the SDK sends them under proto_compress_fwdbwd", async () => {
    const { url } = await server({ protocol: "tinker", tinkerClientConfig: { proto_compress_fwdbwd: true } });
    const { modelId } = await model(url);
    const body = sdkBody(modelId, 1, sftData("compress me ".repeat(6)), "cross_entropy", undefined, false);
    // The zstd command line compresses: an implementation independent of the server's.
    const compressed = execFileSync("zstd", ["-q", "-c"], { input: body });
    expect(compressed.length).toBeLessThan(body.length);
    const submitted = await postProto(url, "/api/v1/forward_backward", compressed, { "content-encoding": "zstd" });
    expect(submitted.status).toBe(200);
    expect(
      readOutput((await retrieve(url, submitted.body.request_id, "application/x-protobuf")).fields!).logprobs[0],
    ).toHaveLength(73);
    const garbled = await postProto(url, "/api/v1/forward_backward", compressed.subarray(0, 10), {
      "content-encoding": "zstd",
    });
    expect([garbled.status, garbled.body.error]).toEqual([400, "invalid_protobuf"]);
    const brotli = await postProto(url, "/api/v1/forward_backward", body, { "content-encoding": "br" });
    expect([brotli.status, brotli.body.error]).toEqual([415, "unsupported_content_encoding"]);
  });

  it("answers a sample in protobuf: int32 tokens, float32 logprobs, NaN for the first prompt logprob", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { sessionId } = await model(url);
    const sampler = await call(url, "POST", "/api/v1/create_sampling_session", {
      session_id: sessionId,
      sampling_session_seq_id: 0,
      base_model: "tiny",
      type: "create_sampling_session",
    });
    const request = {
      sampling_session_id: sampler.body.sampling_session_id,
      seq_id: 0,
      num_samples: 2,
      prompt: { chunks: [{ type: "encoded_text", tokens: [256, 104, 105] }] },
      sampling_params: { max_tokens: 4, seed: 5, temperature: 1, top_k: -1, top_p: 1 },
      prompt_logprobs: true,
      topk_prompt_logprobs: 0,
      type: "sample",
    };
    const asProto = await call(url, "POST", "/api/v1/asample", request);
    const asJson = await call(url, "POST", "/api/v1/asample", { ...request, seq_id: 1 });
    const { fields } = await retrieve(url, asProto.body.request_id, "application/x-protobuf, application/json");
    const { json } = await retrieve(url, asJson.body.request_id, "application/json");
    const sequences = all(fields!, 1).map((s) => readFields(s.bytes!));
    expect(
      sequences.map((s) => ({
        stop_reason: one(s, 1) ? "length" : "stop",
        tokens: leArray(one(s, 2)!.bytes!, "i32"),
        logprobs: leArray(one(s, 3)!.bytes!, "f32"),
      })),
    ).toEqual(json.sequences.map((s: any) => ({ ...s, logprobs: s.logprobs.map(Math.fround) })));
    const prompt = leArray(one(fields!, 2)!.bytes!, "f32");
    expect(Number.isNaN(prompt[0])).toBe(true);
    expect(prompt.slice(1)).toEqual(json.prompt_logprobs.slice(1).map(Math.fround));
    expect(json.prompt_logprobs[0]).toBeNull();
  });

  it("refuses protobuf it cannot take, with a status that says why", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await model(url);
    const notJson = await postProto(url, "/api/v1/optim_step", new Uint8Array([1, 2, 3]));
    expect([notJson.status, notJson.body.error]).toEqual([415, "unsupported_media_type"]);
    const garbage = await postProto(url, "/api/v1/forward_backward", Uint8Array.from([0x0a, 0xff, 0xff]));
    expect([garbage.status, garbage.body.error]).toEqual([400, "invalid_protobuf"]);
    const dmel = new Writer()
      .bytes(1, modelId)
      .varint(2, 1)
      .bytes(3, new Writer().bytes(1, new Writer().bytes(3, new Writer().bytes(1, Uint8Array.from([1])))))
      .bytes(4, "cross_entropy")
      .finish();
    const audio = await postProto(url, "/api/v1/forward_backward", dmel);
    expect(audio.status).toBe(400);
    expect(audio.body.message).toMatch(/dmel \(audio\) chunks are not supported/);
    const seqZero = await postProto(
      url,
      "/api/v1/forward_backward",
      sdkBody(modelId, 0, sftData("a"), "cross_entropy", undefined, false),
    );
    expect([seqZero.status, seqZero.body.error]).toEqual([400, "invalid_seq_id"]);
    const unknownKey = sftData("a");
    unknownKey[0]!.inputs.mask = { data: [1, 1], dtype: "float32", shape: [2] };
    const rejected = await postProto(
      url,
      "/api/v1/forward_backward",
      sdkBody(modelId, 1, unknownKey, "cross_entropy", undefined, false),
    );
    const failed = await retrieve(url, rejected.body.request_id, "application/x-protobuf");
    expect(failed.json).toMatchObject({ category: "user" });
    expect(failed.json.error).toMatch(/mask/);
  });

  it("serves what the SDK's resume and ephemeral samplers need: weights_info, save_weights_for_sampler without a path, telemetry", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId, sessionId } = await model(url);
    const saved = await call(url, "POST", "/api/v1/save_weights", {
      model_id: modelId,
      path: "c",
      seq_id: 1,
      overwrite: false,
      type: "save_weights",
    });
    const path = (await retrieve(url, saved.body.request_id, "application/json")).json.path;
    expect((await call(url, "POST", "/api/v1/weights_info", { tinker_path: path })).body).toEqual({
      base_model: "tiny",
      is_lora: true,
      lora_rank: 8,
      train_unembed: true,
      train_mlp: true,
      train_attn: true,
    });
    expect((await call(url, "POST", "/api/v1/weights_info", { tinker_path: "tinker://x/weights/y" })).status).toBe(404);
    const ephemeral = await call(url, "POST", "/api/v1/save_weights_for_sampler", {
      model_id: modelId,
      sampling_session_seq_id: 3,
      seq_id: 2,
      type: "save_weights_for_sampler",
    });
    const made = (await retrieve(url, ephemeral.body.request_id, "application/json")).json;
    expect(made).toEqual({ sampling_session_id: `${sessionId}:sample:3`, type: "save_weights_for_sampler" });
    const sample = await call(url, "POST", "/api/v1/asample", {
      sampling_session_id: made.sampling_session_id,
      seq_id: 0,
      num_samples: 1,
      prompt: { chunks: [{ type: "encoded_text", tokens: [256] }] },
      sampling_params: { max_tokens: 2, temperature: 1, top_k: -1, top_p: 1 },
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
      type: "sample",
    });
    expect((await retrieve(url, sample.body.request_id, "application/json")).json.sequences[0].tokens).toHaveLength(2);
    const both = await call(url, "POST", "/api/v1/save_weights_for_sampler", {
      model_id: modelId,
      path: "p",
      sampling_session_seq_id: 4,
      seq_id: 3,
      type: "save_weights_for_sampler",
    });
    expect(both.status).toBe(422);
    expect((await call(url, "POST", "/api/v1/telemetry", { events: [{ event: "x" }] })).body).toEqual({
      status: "accepted",
    });
  });
});
