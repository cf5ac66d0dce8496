/**
 * The memory budget of `nexrl serve`: models and sampling sessions past it are refused with a 503
 * that says what holds the memory and what to do, and the memory of unloaded ones (an expired
 * session's, a terminated Weaver model's) is given back.
 */
import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { call, server, tinkerSession } from "../support/server.js";

/** A tiny Tinker model (and a Weaver one's default): LoRA of rank 32, whose factors, moments and base projections come on top. */
const TINY = LocalEngine.memoryBytes("tiny", { threads: 1, lora: { rank: 32 } });
const MB = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MB`;

const createModel = (url: string, sessionId: string, seq: number) =>
  call(url, "POST", "/api/v1/create_model", {
    session_id: sessionId,
    model_seq_id: seq,
    base_model: "tiny",
    type: "create_model",
  });

describe("the memory budget of nexrl serve", () => {
  it("refuses a Tinker model past the budget with 503, and takes one again once an expired session gave its memory back", async () => {
    const { url } = await server({
      protocol: "tinker",
      threads: 1,
      memoryBudgetBytes: 2.5 * TINY,
      sessionTimeoutSeconds: 0.5,
    });
    const first = await tinkerSession(url);
    const second = await tinkerSession(url);
    const refused = await createModel(url, second.sessionId, 1);
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({
      error: "memory_budget_exceeded",
      message: `nexrl serve has no memory for a tiny model (${MB(TINY)}): the models and sampling sessions loaded hold ${MB(2 * TINY)} of its ${MB(2.5 * TINY)} memory budget; unload the models you no longer use (Tinker unload_model, Weaver terminate), wait for abandoned sessions to expire (0.5 s without a heartbeat), or give the server a larger budget (nexrl serve --memory-budget MB)`,
      retryable: true,
    });
    // A sampling session of a base model holds an engine too.
    const sampler = await call(url, "POST", "/api/v1/create_sampling_session", {
      session_id: second.sessionId,
      sampling_session_seq_id: 0,
      base_model: "tiny",
      type: "create_sampling_session",
    });
    expect([sampler.status, sampler.body.error]).toEqual([503, "memory_budget_exceeded"]);
    // Both sessions are abandoned; once they expire their memory is free again.
    for (const { modelId } of [first, second]) {
      const info = () => call(url, "POST", "/api/v1/get_info", { model_id: modelId, type: "get_info" });
      await expect.poll(async () => (await info()).status, { timeout: 5000 }).toBe(410);
    }
    const third = await tinkerSession(url);
    expect((await createModel(url, third.sessionId, 1)).status).toBe(200);
    expect((await createModel(url, third.sessionId, 2)).status).toBe(503);
  });

  it("refuses a Weaver model past the budget with 503 and frees a terminated model's memory", async () => {
    const { url } = await server({ protocol: "weaver", threads: 1, memoryBudgetBytes: 1.5 * TINY });
    const { body: session } = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
    const create = () =>
      call(url, "POST", `/api/v1/sessions/${session.id}/models`, { model_seq_id: 1, base_model: "tiny" });
    const model = await create();
    expect(model.status).toBe(200);
    const refused = await create();
    expect([refused.status, refused.body.error]).toEqual([503, "memory_budget_exceeded"]);
    expect(refused.body.message).toMatch(`hold ${MB(TINY)} of its ${MB(1.5 * TINY)} memory budget`);
    expect((await call(url, "POST", `/api/v1/models/${model.body.id}/terminate`, {})).status).toBe(200);
    await expect.poll(async () => (await create()).status, { timeout: 5000 }).toBe(200);
  });
});
