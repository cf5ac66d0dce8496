/**
 * Robustness probes of `nexrl serve` and the agent gateway over real HTTP: oversized prompts,
 * malformed URLs, too many samples, malformed and oversized bodies, traversal in checkpoint
 * names — each a client error (4xx, not retryable) with a message, never a 500 with a stack.
 */
import { describe, expect, it } from "vitest";
import { AgentGateway } from "../../src/agent/index.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { OpenAIInferenceClient } from "../../src/inference/index.js";
import { tinyInference } from "../support/agent.js";
import {
  call,
  expectClientError,
  longTokens,
  server,
  tinkerDatum,
  tinkerModel,
  tinkerResult,
  tinkerSample,
  tinkerSampler,
  weaverModel,
  weaverSample,
} from "./serve-helpers.js";

/** A prompt of 130 000 characters: far over every preset's context (128 and 256 tokens). */
const LONG_TEXT = "x".repeat(130_000);
const CONTEXT_MESSAGE = /130\d{3} tokens but the model's context length is 128/;

/** A server whose unexpected-error log the test can read (it must stay empty). */
async function loggedServer() {
  const log: string[] = [];
  const running = await server({ log: (line) => log.push(line) });
  return { url: running.url, log };
}

describe("oversized prompts get a 400 context-length error, not a retryable 500", () => {
  it("on the OpenAI-compatible chat and completions endpoints", async () => {
    const { url, log } = await loggedServer();
    const chat = await call(url, "POST", "/v1/chat/completions", {
      model: "tiny",
      messages: [{ role: "user", content: LONG_TEXT }],
    });
    expectClientError(chat);
    expect(chat.body.error.message).toMatch(CONTEXT_MESSAGE);
    const completion = await call(url, "POST", "/v1/completions", { model: "tiny", prompt: LONG_TEXT });
    expectClientError(completion);
    expect(completion.body.error.message).toMatch(CONTEXT_MESSAGE);
    const ids = await call(url, "POST", "/v1/completions", { model: "tiny", prompt: longTokens(130_000) });
    expectClientError(ids);
    expect(log).toEqual([]);
  });

  it("on Tinker sample and forward_backward, before any work is queued", async () => {
    const { url, log } = await loggedServer();
    const { sessionId, modelId } = await tinkerModel(url);
    const sampler = await tinkerSampler(url, sessionId);
    const sample = await call(url, "POST", "/api/v1/asample", tinkerSample(sampler, longTokens(130_000)));
    expectClientError(sample);
    expect(sample.body).toMatchObject({ error: "context_length_exceeded" });
    expect(sample.body.message).toMatch(/the prompt has 130000 tokens but the model's context length is 128/);
    const datum = tinkerDatum(LONG_TEXT);
    const backward = await call(url, "POST", "/api/v1/forward_backward", {
      forward_backward_input: { data: [tinkerDatum("ok"), datum], loss_fn: "cross_entropy" },
      model_id: modelId,
      seq_id: 1,
    });
    expectClientError(backward);
    expect(backward.body.message).toMatch(/datum 1 has 130001 tokens but the model's context length is 128/);
    // The refused request took no seq_id: the next request with seq_id 1 runs.
    const ok = await call(url, "POST", "/api/v1/forward_backward", {
      forward_backward_input: { data: [tinkerDatum("ok")], loss_fn: "cross_entropy" },
      model_id: modelId,
      seq_id: 1,
    });
    expect((await tinkerResult(url, ok.body.request_id)).metrics["loss:sum"]).toBeGreaterThan(0);
    expect(log).toEqual([]);
  });

  it("on Weaver samples and forward-backward passes", async () => {
    const { url, log } = await loggedServer();
    const { mid, ssid } = await weaverModel(url);
    const sample = await call(
      url,
      "POST",
      `/api/v1/sampling-sessions/${ssid}/samples`,
      weaverSample(longTokens(130_000)),
    );
    expectClientError(sample);
    expect(sample.body.message).toMatch(/the prompt has 130000 tokens/);
    const tokens = longTokens(130_001);
    const backward = await call(url, "POST", `/api/v1/models/${mid}/forward-backward-passes`, {
      payload: {
        model_id: mid,
        seq_id: 1,
        forward_backward_input: {
          loss_fn: "cross_entropy",
          data: [
            {
              model_input: { chunks: [{ type: "encoded_text", tokens: tokens.slice(0, -1) }] },
              loss_fn_inputs: {
                target_tokens: { data: tokens.slice(1), dtype: "int64" },
                weights: { data: tokens.slice(1).map(() => 1), dtype: "float32" },
              },
            },
          ],
        },
      },
    });
    expectClientError(backward);
    expect(backward.body).toMatchObject({ error: "context_length_exceeded" });
    expect(log).toEqual([]);
  });

  it("on the agent gateway's chat and completions, ending the episode as truncated by the context", async () => {
    const log: string[] = [];
    const gateway = await AgentGateway.start({ modelName: "tiny", log: (line) => log.push(line) });
    try {
      const session = gateway.openRollout(await tinyInference());
      const base = `${gateway.url}/rollouts/${session.id}`;
      const chat = await call(base, "POST", "/v1/chat/completions", {
        model: "tiny",
        messages: [{ role: "user", content: LONG_TEXT }],
      });
      expectClientError(chat);
      expect(chat.body.error.message).toMatch(CONTEXT_MESSAGE);
      const completion = await call(base, "POST", "/v1/completions", { model: "tiny", prompt: LONG_TEXT });
      expectClientError(completion);
      expect(completion.body.error).toMatchObject({ code: "rollout_limit_reached" });
      expect(session.finish().truncation).toMatchObject({ reason: "context_length" });
      expect(log).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
  it("on the agent gateway when the model's own server refuses the prompt with a 400", async () => {
    const { url } = await loggedServer();
    const log: string[] = [];
    const gateway = await AgentGateway.start({ modelName: "tiny", log: (line) => log.push(line) });
    try {
      const inference = new OpenAIInferenceClient({
        baseURL: `${url}/v1`,
        model: "tiny",
        tokenizer: new ByteTokenizer(),
        chatVia: "completions",
      });
      const session = gateway.openRollout(inference);
      const chat = await call(`${gateway.url}/rollouts/${session.id}`, "POST", "/v1/chat/completions", {
        model: "tiny",
        messages: [{ role: "user", content: LONG_TEXT }],
      });
      expectClientError(chat);
      expect(chat.body.error.message).toMatch(/failed with HTTP 400: .*context length is 128/);
      expect(log).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
});

describe("malformed percent-escapes in URLs get a 400, not a retryable 500 with a stack", () => {
  it("on every route of nexrl serve that reads an id from the path", async () => {
    const { url, log } = await loggedServer();
    const bad = "%E0%A4%A";
    for (const [method, path] of [
      ["POST", `/api/v1/models/${bad}/export-sampler`],
      ["POST", `/api/v1/models/${bad}/forward-backward-passes`],
      ["GET", `/api/v1/models/${bad}`],
      ["GET", `/api/v1/sessions/${bad}`],
      ["POST", `/api/v1/sampling-sessions/${bad}/samples`],
      ["GET", `/api/v1/operations/${bad}`],
      ["GET", `/v1/models/${bad}`],
    ] as const) {
      const answer = await call(url, method, path, method === "POST" ? {} : undefined);
      expectClientError(answer);
      expect(JSON.stringify(answer.body), path).toContain("is not valid percent-encoding");
    }
    expect(log).toEqual([]);
  });

  it("on the agent gateway's rollout routes", async () => {
    const log: string[] = [];
    const gateway = await AgentGateway.start({ log: (line) => log.push(line) });
    try {
      for (const route of ["/v1/chat/completions", "/v1/completions", "/v1/models"]) {
        const method = route === "/v1/models" ? "GET" : "POST";
        const answer = await call(
          gateway.url,
          method,
          `/rollouts/%E0%A4%A${route}`,
          method === "POST" ? {} : undefined,
        );
        expectClientError(answer);
        expect(answer.body.error.message).toMatch(
          /rollout id in the URL path, "%E0%A4%A", is not valid percent-encoding/,
        );
      }
      expect(log).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
});

describe("sample counts are capped at 128 per request", () => {
  it("answers 400 naming the cap on Tinker num_samples, Weaver num_samples and OpenAI n", async () => {
    const { url } = await loggedServer();
    const { sessionId } = await tinkerModel(url);
    const tinker = await call(
      url,
      "POST",
      "/api/v1/asample",
      tinkerSample(await tinkerSampler(url, sessionId), [1, 2], 20_000),
    );
    expectClientError(tinker);
    expect(tinker.body).toMatchObject({ error: "too_many_samples" });
    expect(tinker.body.message).toMatch(/num_samples is 20000; nexrl serve samples at most 128 sequences per request/);
    const { ssid } = await weaverModel(url);
    const weaver = await call(url, "POST", `/api/v1/sampling-sessions/${ssid}/samples`, weaverSample([1, 2], 129));
    expectClientError(weaver);
    expect(weaver.body.message).toMatch(/at most 128/);
    const openai = await call(url, "POST", "/v1/completions", { model: "tiny", prompt: "a", n: 129 });
    expectClientError(openai);
    expect(openai.body.error).toMatchObject({ param: "n" });
    expect(openai.body.error.message).toMatch(/128/);
    // The cap itself is served.
    const most = await call(
      url,
      "POST",
      "/api/v1/asample",
      tinkerSample(await tinkerSampler(url, sessionId), [1, 2], 128, 2),
    );
    expect((await tinkerResult(url, most.body.request_id)).sequences).toHaveLength(128);
  });
});

describe("malformed requests and checkpoint names", () => {
  it("answers invalid JSON, unknown fields, wrong methods and unknown routes with 4xx", async () => {
    const { url, log } = await loggedServer();
    expectClientError(await call(url, "POST", "/api/v1/create_session", "{not json"));
    expectClientError(await call(url, "POST", "/api/v1/create_session", { nope: 1 }), 422);
    expectClientError(await call(url, "POST", "/v1/chat/completions", "[1,"));
    expectClientError(await call(url, "GET", "/v1/chat/completions"), 405);
    expectClientError(await call(url, "GET", "/api/v1/no-such-route"), 404);
    expect(log).toEqual([]);
  });

  it("refuses a body over the OpenAI endpoints' 16 MiB limit with 413", async () => {
    const { url } = await loggedServer();
    const huge = await call(url, "POST", "/v1/completions", { model: "tiny", prompt: "y".repeat(17 * 1024 * 1024) });
    expectClientError(huge, 413);
  });

  it("refuses traversal in checkpoint names as the client's error (Tinker save_weights, Weaver checkpoints)", async () => {
    const { url } = await loggedServer();
    const { modelId } = await tinkerModel(url);
    for (const [seq, name] of [
      [1, "../../escaped"],
      [2, "/etc/passwd"],
      [3, "a/b"],
    ] as const) {
      const saved = await call(url, "POST", "/api/v1/save_weights", {
        model_id: modelId,
        path: name,
        seq_id: seq,
        type: "save_weights",
      });
      const outcome = await tinkerResult(url, saved.body.request_id);
      expect(outcome, name).toMatchObject({ category: "user" });
      expect(outcome.error).toMatch(/name/);
    }
    const { mid } = await weaverModel(url);
    const checkpoint = await call(url, "POST", `/api/v1/models/${mid}/checkpoints`, { type: "weight", name: "../x" });
    let op = checkpoint.body;
    while (op.status !== "done" && op.status !== "error")
      op = (await call(url, "GET", `/api/v1/operations/${checkpoint.body.id}`)).body;
    expect(op).toMatchObject({ status: "error", error_code: "invalid_request" });
  });
});
