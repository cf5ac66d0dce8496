/**
 * Sessions of `nexrl serve` expire when their heartbeats stop: their models and sampling sessions
 * are unloaded, one log line says what was freed, and requests naming them get 410 saying why.
 * Sessions that keep heartbeating, and the OpenAI-compatible `--model` models, stay.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { ADAM, call, server, tinkerDatum, tinkerResult, tinkerSession } from "../support/server.js";

const TIMEOUT = 0.4;

const dir = await mkdtemp(join(tmpdir(), "nexrl-sessions-"));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** A server with a short session timeout whose log lines are kept. */
async function expiring(options: Parameters<typeof server>[0] = {}) {
  const lines: string[] = [];
  const running = await server({ sessionTimeoutSeconds: TIMEOUT, threads: 1, log: (l) => lines.push(l), ...options });
  return { url: running.url, lines };
}

const heartbeat = (url: string, sessionId: string) =>
  call(url, "POST", "/api/v1/session_heartbeat", { session_id: sessionId, type: "session_heartbeat" });

const getInfo = (url: string, modelId: string) =>
  call(url, "POST", "/api/v1/get_info", { model_id: modelId, type: "get_info" });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("session expiry on nexrl serve", () => {
  it("unloads an abandoned Tinker session's model and sampling session, keeps a heartbeating one and the --model models", async () => {
    const local = new LocalTrainingService({ outputDir: dir, threads: 1 });
    const pinned = { samplingClient: await local.createSamplingClient("tiny"), tokenizer: new ByteTokenizer() };
    const { url, lines } = await expiring({ openaiModels: { pinned } });
    const alive = await tinkerSession(url);
    const abandoned = await tinkerSession(url);
    const sampler = await call(url, "POST", "/api/v1/create_sampling_session", {
      session_id: abandoned.sessionId,
      sampling_session_seq_id: 0,
      base_model: "tiny",
      type: "create_sampling_session",
    });
    const samplerId = sampler.body.sampling_session_id as string;
    // The live session heartbeats every 100 ms (faster than the timeout, as the SDK's 10 s are than 300 s).
    const beats = setInterval(() => void heartbeat(url, alive.sessionId), 100);
    try {
      await expect.poll(async () => (await getInfo(url, abandoned.modelId)).status, { timeout: 5000 }).toBe(410);
      await sleep(3 * TIMEOUT * 1000);
      const live = await getInfo(url, alive.modelId);
      expect(live.status).toBe(200);
      const fb = await call(url, "POST", "/api/v1/forward_backward", {
        forward_backward_input: { data: [tinkerDatum("still here")], loss_fn: "cross_entropy" },
        model_id: alive.modelId,
        seq_id: 1,
      });
      expect((await tinkerResult(url, fb.body.request_id)).metrics["loss:sum"]).toBeGreaterThan(0);
    } finally {
      clearInterval(beats);
    }
    const expiry = `expired after ${TIMEOUT} s without a heartbeat`;
    expect((await getInfo(url, abandoned.modelId)).body).toEqual({
      error: "session_expired",
      message: `model "${abandoned.modelId}" was unloaded: its session ${abandoned.sessionId} ${expiry} (nexrl serve --session-timeout); create a new session and training client (load its last checkpoint to continue)`,
      retryable: false,
    });
    const optim = await call(url, "POST", "/api/v1/optim_step", {
      adam_params: ADAM,
      model_id: abandoned.modelId,
      seq_id: 1,
      type: "optim_step",
    });
    expect([optim.status, optim.body.error]).toEqual([410, "session_expired"]);
    const sample = await call(url, "POST", "/api/v1/asample", {
      sampling_session_id: samplerId,
      seq_id: 0,
      num_samples: 1,
      prompt: { chunks: [{ type: "encoded_text", tokens: [256] }] },
      sampling_params: { max_tokens: 4, temperature: 1, top_k: -1, top_p: 1 },
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
      type: "sample",
    });
    expect(sample.status).toBe(410);
    expect(sample.body.message).toMatch(
      `sampling session "${samplerId}" was closed: its session ${abandoned.sessionId} ${expiry}`,
    );
    const beat = await heartbeat(url, abandoned.sessionId);
    expect(beat.status).toBe(410);
    expect(beat.body.message).toBe(
      `session "${abandoned.sessionId}" ${expiry} (nexrl serve --session-timeout) and its models were unloaded; call create_session first, and keep sending heartbeats`,
    );
    const again = await call(url, "POST", "/api/v1/create_model", {
      session_id: abandoned.sessionId,
      model_seq_id: 1,
      base_model: "tiny",
      type: "create_model",
    });
    expect([again.status, again.body.error]).toEqual([410, "session_expired"]);
    // An unknown session is still 404, not an expired one.
    expect((await heartbeat(url, "never-created")).status).toBe(404);
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^nexrl serve: session ${abandoned.sessionId} ${expiry}; unloaded 1 model \\(${abandoned.modelId}\\) and 1 sampling session \\(${samplerId}\\), freeing \\d+ MB$`,
        ),
      ),
    ]);
    // The models given on the command line (--model) and the presets are not sessions' and stay.
    for (const model of ["pinned", "tiny"]) {
      const completion = await call(url, "POST", "/v1/completions", { model, prompt: "a", max_tokens: 2 });
      expect(completion.status).toBe(200);
    }
  });

  it("unloads an abandoned Weaver session's model and sampling session", async () => {
    const { url, lines } = await expiring({ protocol: "weaver" });
    const { body: session } = await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "test" });
    const model = await call(url, "POST", `/api/v1/sessions/${session.id}/models`, {
      model_seq_id: 1,
      base_model: "tiny",
    });
    const sampler = await call(url, "POST", `/api/v1/sessions/${session.id}/sampling-sessions`, {
      sampling_session_seq_id: 1,
      base_model: "tiny",
      model_path: null,
    });
    expect(sampler.status).toBe(201);
    const mid = model.body.id as string;
    await expect
      .poll(async () => (await call(url, "GET", `/api/v1/models/${mid}`)).status, { timeout: 5000 })
      .toBe(410);
    expect((await call(url, "GET", `/api/v1/models/${mid}`)).body.message).toMatch(
      `model "${mid}" was unloaded: its session ${session.id} expired after ${TIMEOUT} s without a heartbeat`,
    );
    expect((await call(url, "GET", `/api/v1/sampling-sessions/${sampler.body.id}`)).status).toBe(410);
    const beat = await call(url, "POST", `/api/v1/sessions/${session.id}/heartbeat`);
    expect([beat.status, beat.body.error]).toEqual([410, "session_expired"]);
    expect(beat.body.message).toMatch(/create one with POST \/api\/v1\/sessions, and keep sending heartbeats$/);
    expect(lines).toEqual([
      expect.stringMatching(
        `nexrl serve: session ${session.id} expired after ${TIMEOUT} s without a heartbeat; unloaded 1 model \\(${mid}\\) and 1 sampling session \\(${sampler.body.id}\\), freeing \\d+ MB`,
      ),
    ]);
  });
});
