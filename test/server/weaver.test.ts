import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeStateFile } from "../../src/engine/state-file.js";
import { serve, tempDir } from "../support/training.js";
import { ADAM, call, server, tokens, type Answer } from "../support/server.js";

async function model(url: string, trainingMode: "lora" | "full_ft" = "lora"): Promise<{ sid: string; mid: string }> {
  const { body } = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
  const created = await call(url, "POST", `/api/v1/sessions/${body.id}/models`, {
    model_seq_id: 1,
    base_model: "tiny",
    training_mode: trainingMode,
  });
  expect(created.body).toMatchObject({
    base_model: "tiny",
    training_mode: trainingMode,
    tokenizer_path: "byte",
    max_context_length: 128,
  });
  return { sid: body.id, mid: created.body.id };
}

async function done(url: string, operation: Answer["body"]): Promise<any> {
  for (let op = operation; ; op = (await call(url, "GET", `/api/v1/operations/${operation.id}`)).body) {
    if (op.status === "done" || op.status === "error") return op;
    expect(["pending", "running"]).toContain(op.status);
  }
}

function rlDatum(text: string, advantages: number[], lossMask?: number[]) {
  const t = tokens(text);
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: t.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: t.slice(1), dtype: "int64" },
      logprobs: { data: advantages.map(() => -5), dtype: "float32" },
      advantages: { data: advantages, dtype: "float64" },
      ...(lossMask && { loss_mask: { data: lossMask, dtype: "float32" } }),
    },
  };
}

describe("weaver protocol on nexrl serve", () => {
  it("answers operations that are polled until done, in seq_id order", async () => {
    const { url } = await server({ protocol: "weaver" });
    const { mid } = await model(url);
    const early = await call(url, "POST", `/api/v1/models/${mid}/optimizer-steps`, {
      payload: { model_id: mid, seq_id: 2, adam_params: ADAM },
    });
    expect(early.body).toEqual({ id: expect.any(String), status: "pending" });
    expect((await call(url, "GET", `/api/v1/operations/${early.body.id}`)).body.status).toBe("pending");
    const pass = await call(url, "POST", `/api/v1/models/${mid}/forward-backward-passes`, {
      payload: {
        model_id: mid,
        seq_id: 1,
        forward_backward_input: { loss_fn: "importance_sampling", data: [rlDatum("abc", [1, 1, 1, 1], [0, 1, 1, 1])] },
      },
    });
    const loss = await done(url, pass.body);
    expect(loss.response.result.loss_fn_outputs[0].logprobs).toEqual({ data: expect.any(Array), dtype: "float32" });
    expect((await done(url, early.body)).response.result.metrics["grad_norm:mean"]).toBeGreaterThan(0);
  });

  it("folds loss_mask into the advantages, and requires it for importance_sampling", async () => {
    const { url } = await server({ protocol: "weaver" });
    const { mid } = await model(url);
    const forward = async (seq: number, datum: unknown) =>
      done(
        url,
        (
          await call(url, "POST", `/api/v1/models/${mid}/forward-passes`, {
            payload: { model_id: mid, seq_id: seq, forward_input: { loss_fn: "importance_sampling", data: [datum] } },
          })
        ).body,
      );
    const masked = await forward(1, rlDatum("abc", [3, 1, 1, 1], [0, 1, 1, 1]));
    const zeroed = await forward(2, rlDatum("abc", [0, 1, 1, 1], [0, 1, 1, 1]));
    expect(masked.response.result.metrics).toEqual(zeroed.response.result.metrics);
    const missing = await forward(3, rlDatum("abc", [0, 1, 1, 1]));
    expect(missing).toMatchObject({
      status: "error",
      error_code: "invalid_request",
      error_message: expect.stringMatching(/missing loss input "loss_mask"/),
    });
  });

  it("reads nested-list tensors and rejects ragged ones", async () => {
    const { url } = await server({ protocol: "weaver" });
    const { mid } = await model(url);
    const flat = rlDatum("abc", [0, 1, 1, 1], [1, 1, 1, 1]);
    const nested = rlDatum("abc", [0, 1, 1, 1], [1, 1, 1, 1]);
    (nested.loss_fn_inputs.advantages as { data: unknown }).data = [[0, 1, 1, 1]];
    const pass = async (seq: number, datum: unknown) =>
      done(
        url,
        (
          await call(url, "POST", `/api/v1/models/${mid}/forward-passes`, {
            payload: { model_id: mid, seq_id: seq, forward_input: { loss_fn: "importance_sampling", data: [datum] } },
          })
        ).body,
      );
    expect((await pass(1, nested)).response).toEqual((await pass(2, flat)).response);
    const ragged = rlDatum("abc", [1, 1, 1, 1], [1, 1, 1, 1]);
    (ragged.loss_fn_inputs.advantages as { data: unknown }).data = [[1, 1], [1]];
    expect(await pass(3, ragged)).toMatchObject({
      status: "error",
      error_message: expect.stringMatching(/not rectangular/),
    });
  });

  it("opens base-model sessions at once (201) and snapshot sessions through a sync operation (202)", async () => {
    const { url } = await server({ protocol: "weaver" });
    const { sid, mid } = await model(url);
    const base = await call(url, "POST", `/api/v1/sessions/${sid}/sampling-sessions`, {
      sampling_session_seq_id: 1,
      base_model: "tiny",
    });
    expect(base.status).toBe(201);
    expect(base.body).toMatchObject({ id: expect.any(String), base_model: "tiny" });
    const exported = await done(
      url,
      (await call(url, "POST", `/api/v1/models/${mid}/export-sampler`, { seq_id: 1, path: "s", ttl_seconds: 3600 }))
        .body,
    );
    expect(exported.response).toEqual({ modelPath: `weaver://${mid}/sampler_weights/s`, ttlSeconds: 3600 });
    // Without ttl_seconds the export is kept (the SDK sends its one-hour default itself).
    const kept = await done(
      url,
      (await call(url, "POST", `/api/v1/models/${mid}/export-sampler`, { seq_id: 2, path: "k" })).body,
    );
    expect(kept.response).toEqual({ modelPath: `weaver://${mid}/sampler_weights/k`, ttlSeconds: null });
    const snap = await call(url, "POST", `/api/v1/sessions/${sid}/sampling-sessions`, {
      sampling_session_seq_id: 2,
      model_path: exported.response.modelPath,
      model_id: mid,
    });
    expect(snap.status).toBe(202);
    expect((await done(url, snap.body.sync_operation)).status).toBe("done");
    const ssid = snap.body.sampling_session.id;
    expect((await call(url, "GET", `/api/v1/sampling-sessions/${ssid}`)).body).toEqual({
      id: ssid,
      base_model: "tiny",
      model_path: exported.response.modelPath,
    });
    const paused = await call(url, "POST", `/api/v1/sampling-sessions/${ssid}/pause-generation`, { mode: "abort" });
    expect(paused.status).toBe(400);
    expect(paused.body.error).toBe("pause_not_supported");
  });

  it("injects status faults only on GETs and heartbeats, never on a POST a client may not retry", async () => {
    const { url } = await server({ protocol: "weaver", faults: { 500: 1 } });
    const { sid, mid } = await model(url);
    const op = await call(url, "POST", `/api/v1/models/${mid}/export-sampler`, { seq_id: 1, path: "s" });
    expect(op.status).toBe(200);
    expect((await call(url, "GET", `/api/v1/operations/${op.body.id}`)).status).toBe(500);
    expect((await call(url, "POST", `/api/v1/sessions/${sid}/heartbeat`)).status).toBe(500);
    expect((await call(url, "GET", "/health")).status).toBe(200);
  });

  it("requires X-WEAVER-API-KEY when configured", async () => {
    const { url } = await server({ protocol: "weaver", apiKey: "sk-serve-0000" });
    expect((await call(url, "GET", "/api/v1/supported-models")).status).toBe(401);
    const listed = await call(url, "GET", "/api/v1/supported-models", undefined, {
      "x-weaver-api-key": "sk-serve-0000",
    });
    expect(listed.body.items.map((m: { name: string }) => m.name)).toEqual(["tiny", "small", "medium", "large"]);
  });
});

describe("Weaver training modes", () => {
  it("trains a lora model as LoRA of its rank and alpha, and a full_ft model's every weight", async () => {
    const outputDir = await tempDir();
    const { url } = await serve({ protocol: "weaver", threads: 1, outputDir });
    const { body } = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
    const lora = await call(url, "POST", `/api/v1/sessions/${body.id}/models`, {
      model_seq_id: 1,
      base_model: "tiny",
      training_mode: "lora",
      lora_config: { rank: 2, lora_alpha: 8, train_unembed: true, train_mlp: true, train_attn: true },
    });
    expect(lora.body).toMatchObject({ training_mode: "lora", lora_config: { rank: 2, lora_alpha: 8 } });
    const full = await model(url, "full_ft");
    for (const [n, mid] of [lora.body.id as string, full.mid].entries()) {
      const exported = await done(
        url,
        (await call(url, "POST", `/api/v1/models/${mid}/export-sampler`, { seq_id: 1, path: "s" })).body,
      );
      expect(exported.status).toBe("done");
      const file = join(outputDir, "models", String(n), "sampler_weights", "s.nxw");
      const state = decodeStateFile(new Uint8Array(await readFile(file)), file);
      if (n === 0) expect(state.lora).toMatchObject({ rank: 2, alpha: 8 });
      else expect(state.lora).toBeNull();
    }
    const refused = await call(url, "POST", `/api/v1/sessions/${body.id}/models`, {
      model_seq_id: 2,
      base_model: "tiny",
      lora_config: { rank: 1000, train_unembed: true, train_mlp: true, train_attn: true },
    });
    expect([refused.status, refused.body.error]).toEqual([400, "invalid_lora_config"]);
  });
});
