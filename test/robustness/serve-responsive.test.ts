/**
 * `nexrl serve` keeps answering while long work runs: sampling gives the event loop a turn
 * between sequences, so health checks and other requests are served in the meantime.
 */
import { describe, expect, it } from "vitest";
import { call, server, tinkerModel, tinkerResult, tinkerSample, tinkerSampler } from "./serve-helpers.js";

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

describe("nexrl serve stays responsive while it samples", () => {
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
