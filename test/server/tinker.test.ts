import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { ADAM, call, server, tinkerDatum, tinkerSession as session, type Answer } from "../support/server.js";

function poll(url: string, requestId: string): Promise<Answer> {
  return call(url, "POST", "/api/v1/retrieve_future", { request_id: requestId, allow_metadata_only: false });
}

async function result(url: string, requestId: string): Promise<any> {
  for (;;) {
    const answer = await poll(url, requestId);
    expect(answer.status).toBe(200);
    if (answer.body.type !== "try_again") return answer.body;
  }
}

const fwdBwd = (model_id: string, seq_id: number) => ({
  forward_backward_input: { data: [tinkerDatum("abc")], loss_fn: "cross_entropy" },
  model_id,
  seq_id,
});
const TINY = LocalEngine.memoryBytes("tiny", { threads: 1 });
const optim = (model_id: string, seq_id: number) => ({ adam_params: ADAM, model_id, seq_id, type: "optim_step" });

describe("tinker protocol on nexrl serve", () => {
  it("holds an operation that arrives before its predecessors until they have run", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await session(url);
    const early = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 2));
    expect(early.status).toBe(200);
    // The long poll runs out while seq_id 1 is missing.
    expect((await poll(url, early.body.request_id)).body).toEqual({
      type: "try_again",
      request_id: early.body.request_id,
      queue_state: "active",
    });
    const first = await call(url, "POST", "/api/v1/forward_backward", fwdBwd(modelId, 1));
    const loss = await result(url, first.body.request_id);
    const step = await result(url, early.body.request_id);
    expect(loss.metrics["loss:sum"]).toBeGreaterThan(0);
    expect(loss.loss_fn_outputs[0].logprobs).toMatchObject({ dtype: "float32", shape: [4] });
    // The optimizer saw the gradients of seq_id 1: it ran after it.
    expect(step.metrics["grad_norm:mean"]).toBeGreaterThan(0);
    expect(step.metrics["step:max"]).toBe(1);
  });

  it("answers a resubmitted seq_id with the operation it already has, never running it twice", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await session(url);
    await result(url, (await call(url, "POST", "/api/v1/forward_backward", fwdBwd(modelId, 1))).body.request_id);
    const a = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 2));
    const b = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 2));
    expect(a.body.request_id).not.toBe(b.body.request_id);
    expect(await result(url, b.body.request_id)).toEqual(await result(url, a.body.request_id));
    expect((await result(url, a.body.request_id)).metrics["step:max"]).toBe(1);
    expect(
      (await result(url, (await call(url, "POST", "/api/v1/optim_step", optim(modelId, 3))).body.request_id)).metrics[
        "step:max"
      ],
    ).toBe(2);
    const again = await call(url, "POST", "/api/v1/create_model", {
      session_id: modelId.split(":")[0],
      model_seq_id: 0,
      base_model: "tiny",
      type: "create_model",
    });
    expect(again.body.model_id).toBe(modelId);
  });

  it("rejects a seq_id reused by another operation, and one that is not positive", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await session(url);
    await call(url, "POST", "/api/v1/forward_backward", fwdBwd(modelId, 1));
    const conflict = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 1));
    expect(conflict.status).toBe(409);
    expect(conflict.body.message).toMatch(/seq_id 1 was already used by a forward_backward request/);
    expect((await call(url, "POST", "/api/v1/optim_step", optim(modelId, 0))).status).toBe(400);
  });

  it("answers 410 for a promise it does not know, so the client resubmits", async () => {
    const { url } = await server({ protocol: "tinker" });
    const answer = await poll(url, "no-such-request");
    expect(answer.status).toBe(410);
    expect(answer.body.message).toMatch(/resubmit the original request/);
  });

  it("reports a failed operation as {error, category} and an unknown model as 404", async () => {
    const { url } = await server({ protocol: "tinker" });
    const { modelId } = await session(url);
    const bad = { ...fwdBwd(modelId, 1), forward_backward_input: { data: [tinkerDatum("abc")], loss_fn: "ppo" } };
    expect(await result(url, (await call(url, "POST", "/api/v1/forward_backward", bad)).body.request_id)).toEqual({
      error: expect.stringMatching(/ppo on local: missing loss input "logprobs"/),
      category: "user",
    });
    const unknown = await call(url, "POST", "/api/v1/optim_step", optim("nobody", 1));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: "model_not_found", retryable: false });
  });

  it("unloads a model on unload_model: its future answers, later requests get 410, and its memory is free again", async () => {
    const { url } = await server({ protocol: "tinker", threads: 1, memoryBudgetBytes: 1.5 * TINY });
    const { sessionId, modelId } = await session(url);
    const create = (seq: number) =>
      call(url, "POST", "/api/v1/create_model", {
        session_id: sessionId,
        model_seq_id: seq,
        base_model: "tiny",
        type: "create_model",
      });
    expect((await create(1)).status).toBe(503);
    // An operation waiting for a seq_id that never comes fails when its model is unloaded.
    const waiting = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 2));
    const unload = await call(url, "POST", "/api/v1/unload_model", { model_id: modelId, type: "unload_model" });
    expect(unload.body.model_id).toBe(modelId);
    expect(await result(url, unload.body.request_id)).toEqual({ model_id: modelId, type: "unload_model" });
    expect(await result(url, waiting.body.request_id)).toEqual({
      error: `model "${modelId}" was unloaded: a client unloaded it (unload_model); the operation did not run`,
      category: "user",
    });
    const after = await call(url, "POST", "/api/v1/optim_step", optim(modelId, 1));
    expect(after.status).toBe(410);
    expect(after.body).toMatchObject({
      error: "model_unloaded",
      message: `model "${modelId}" was unloaded: a client unloaded it (unload_model); create a new session and training client (load its last checkpoint to continue)`,
    });
    await expect.poll(async () => (await create(1)).status, { timeout: 5000 }).toBe(200);
  });

  it("rejects unknown fields and wrong type literals (422), and malformed JSON (400)", async () => {
    const { url } = await server({ protocol: "tinker" });
    const extra = await call(url, "POST", "/api/v1/create_session", {
      tags: [],
      sdk_version: "x",
      type: "create_session",
      colour: "red",
    });
    expect(extra.status).toBe(422);
    expect(extra.body.message).toMatch(/colour/);
    const literal = await call(url, "POST", "/api/v1/create_session", { tags: [], sdk_version: "x", type: "session" });
    expect(literal.status).toBe(422);
    expect((await call(url, "POST", "/api/v1/create_session", "{not json")).status).toBe(400);
  });

  it("lists the presets, answers client/config and requires the API key when configured", async () => {
    const { url } = await server({ protocol: "tinker", apiKey: "tml-serve-key-0000" });
    expect(
      (await call(url, "GET", "/api/v1/get_server_capabilities", undefined, { "x-api-key": "tml-serve-key-0000" }))
        .body,
    ).toEqual({
      supported_models: [
        { model_name: "tiny", max_context_length: 128 },
        { model_name: "small", max_context_length: 256 },
        { model_name: "medium", max_context_length: 256 },
        { model_name: "large", max_context_length: 512 },
      ],
    });
    expect(
      (
        await call(
          url,
          "POST",
          "/api/v1/client/config",
          { sdk_version: "0.21.0" },
          { "x-api-key": "tml-serve-key-0000" },
        )
      ).body,
    ).toMatchObject({
      pjwt_auth_enabled: false,
      fwdbwd_max_chunk_len: 1024,
    });
    const denied = await call(
      url,
      "POST",
      "/api/v1/client/config",
      { sdk_version: "0.21.0" },
      { "x-api-key": "wrong" },
    );
    expect(denied.status).toBe(401);
    expect(JSON.stringify(denied.body)).not.toContain("tml-serve-key-0000");
    expect((await call(url, "GET", "/healthz")).body).toEqual({ status: "ok" });
  });
});
