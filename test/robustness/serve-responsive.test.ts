/**
 * `nexrl serve` keeps answering while long work runs: every model and sampling session computes
 * in an engine host thread of its own, so health checks and other sessions' requests (their own
 * computing too) are served in the meantime.
 */
import { describe, expect, it } from "vitest";
import { tinkerSession } from "../support/server.js";
import {
  ADAM,
  call,
  longTokens,
  server,
  tinkerModel,
  tinkerResult,
  tinkerSample,
  tinkerSampler,
} from "./serve-helpers.js";

/** A Tinker cross-entropy datum of `n` positions. */
function longDatum(n: number) {
  const t = longTokens(n + 1);
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: t.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: t.slice(1), dtype: "int64", shape: [n] },
      weights: { data: t.slice(1).map(() => 1), dtype: "float32", shape: [n] },
    },
  };
}

/** Records the order in which promises settle. */
function order() {
  const events: string[] = [];
  return {
    events,
    track: <T>(name: string, promise: Promise<T>): Promise<T> =>
      promise.finally(() => {
        events.push(name);
      }),
  };
}

describe("nexrl serve stays responsive while it computes", () => {
  it("answers /health and another session's sampling and training while a forward_backward of 32 × 255 tokens on small runs", async () => {
    const { url } = await server({ longPollTimeoutMs: 600_000 });
    const busy = await tinkerSession(url, "small");
    const other = await tinkerModel(url);
    const sampler = await tinkerSampler(url, other.sessionId);
    const long = await call(url, "POST", "/api/v1/forward_backward", {
      forward_backward_input: { data: Array.from({ length: 32 }, () => longDatum(255)), loss_fn: "cross_entropy" },
      model_id: busy.modelId,
      seq_id: 1,
    });
    expect(long.status).toBe(200);
    const { events, track } = order();
    const finished = track("forward_backward", tinkerResult(url, long.body.request_id));
    // One request after the other, each sent once the one before was answered.
    const others = track(
      "others",
      (async () => {
        expect((await call(url, "GET", "/health")).body).toEqual({ status: "ok" });
        const sampled = await call(url, "POST", "/api/v1/asample", tinkerSample(sampler, [1, 2, 3], 4));
        expect((await tinkerResult(url, sampled.body.request_id)).sequences).toHaveLength(4);
        const trained = await call(url, "POST", "/api/v1/forward_backward", {
          forward_backward_input: { data: [longDatum(16)], loss_fn: "cross_entropy" },
          model_id: other.modelId,
          seq_id: 1,
        });
        expect((await tinkerResult(url, trained.body.request_id)).metrics["loss:sum"]).toBeGreaterThan(0);
        const stepped = await call(url, "POST", "/api/v1/optim_step", {
          adam_params: ADAM,
          model_id: other.modelId,
          seq_id: 2,
          type: "optim_step",
        });
        expect((await tinkerResult(url, stepped.body.request_id)).metrics).toBeDefined();
      })(),
    );
    await others;
    const result = await finished;
    // All of them were answered while the long forward_backward was still running.
    expect(events).toEqual(["others", "forward_backward"]);
    expect(result.loss_fn_outputs).toHaveLength(32);
    expect(result.metrics["loss:sum"]).toBeGreaterThan(0);
  });

  it("answers /health and other requests while a Tinker request samples 128 long sequences", async () => {
    const { url } = await server({ longPollTimeoutMs: 600_000 });
    const { sessionId } = await tinkerModel(url);
    const sampler = await tinkerSampler(url, sessionId);
    // 128 sequences of up to 125 tokens (the context of `tiny`): many times the time of one request.
    const submitted = await call(url, "POST", "/api/v1/asample", tinkerSample(sampler, [1, 2, 3], 128, 200));
    expect(submitted.status).toBe(200);
    const { events, track } = order();
    const sampled = track("sample", tinkerResult(url, submitted.body.request_id));
    const health = track("health", call(url, "GET", "/health"));
    const other = track(
      "session",
      call(url, "POST", "/api/v1/create_session", {
        tags: [],
        sdk_version: "0.25.0",
        type: "create_session",
      }),
    );
    expect((await health).body).toEqual({ status: "ok" });
    expect((await other).body).toMatchObject({ type: "create_session" });
    const result = await sampled;
    // Both were answered while the sampling ran (in either order: they travel on two connections).
    expect(events.slice(0, 2).sort()).toEqual(["health", "session"]);
    expect(events[2]).toBe("sample");
    expect(result.sequences).toHaveLength(128);
  });

  it("answers /health while the OpenAI endpoint samples n = 128", async () => {
    const { url } = await server();
    const { events, track } = order();
    const sampled = track(
      "sample",
      call(url, "POST", "/v1/completions", { model: "tiny", prompt: "abc", n: 128, max_tokens: 120, seed: 1 }),
    );
    // The completion request is on its way first; the health check follows it.
    await new Promise((resolve) => setImmediate(resolve));
    const health = track("health", call(url, "GET", "/health"));
    expect((await health).status).toBe(200);
    const answer = await sampled;
    expect(answer.status).toBe(200);
    expect(answer.body.choices).toHaveLength(128);
    expect(events).toEqual(["health", "sample"]);
  });
});
