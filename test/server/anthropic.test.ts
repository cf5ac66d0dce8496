import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { ChatMessage } from "../../src/wire/tokenizer.js";
import { adamParams, datum } from "../../src/wire/wire.js";
import { startServer, type RunningServer } from "../../src/server/index.js";

const tokenizer = new ByteTokenizer();
const API_KEY = "sk-ant-local-test";
const ANSWER = "the cat sat on the mat.";
const CONVERSATION: ChatMessage[] = [
  { role: "user", content: "where is the cat?" },
  { role: "assistant", content: ANSWER },
];
/** Sampling fields the SDK's types no longer list but the API takes. */
const greedy = { temperature: 0 } as object;
const ask = {
  model: "cat",
  max_tokens: 40,
  messages: [{ role: "user" as const, content: "where is the cat?" }],
  ...greedy,
};

let dir: string;
let running: RunningServer;
let url: string;
let anthropic: Anthropic;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "nexrl-anthropic-"));
  const service = new LocalTrainingService({ outputDir: dir, seed: 5 });
  // A tiny model that has memorised one chat answer, so that greedy answers are readable and stop sequences occur.
  const trainer = await service.createTrainingClient({ baseModel: "tiny" });
  const tokens = tokenizer.applyChatTemplate(CONVERSATION);
  const data = [datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: tokens.slice(1).map(() => 1) })];
  for (let i = 0; i < 250; i++) {
    await trainer.forwardBackward(data, "cross_entropy");
    await trainer.optimStep(adamParams({ learningRate: 3e-2 }));
  }
  const path = (await (await trainer.saveWeightsForSampler("cat")).result()).path;
  const samplingClient = await service.createSamplingClient(path);
  running = await startServer({
    outputDir: dir,
    protocol: "openai",
    apiKey: API_KEY,
    openaiModels: { cat: { samplingClient, tokenizer } },
    log: () => undefined,
  });
  url = running.url;
  anthropic = new Anthropic({ baseURL: url, apiKey: API_KEY, maxRetries: 0 });
});

afterAll(async () => {
  await running.close();
  await rm(dir, { recursive: true, force: true });
});

/** The SDK error a request fails with. */
async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const error = await promise.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(Anthropic.APIError);
  return error as InstanceType<typeof Anthropic.APIError>;
}

describe("nexrl serve: Anthropic Messages driven by @anthropic-ai/sdk", () => {
  it("answers messages.create with the model's answer, end_turn and usage", async () => {
    const message = await anthropic.messages.create(ask);
    const prompt = tokenizer.applyChatTemplate(CONVERSATION.slice(0, 1), { addGenerationPrompt: true });
    expect(message).toEqual({
      id: expect.stringMatching(/^msg_/),
      type: "message",
      role: "assistant",
      model: "cat",
      content: [{ type: "text", text: ANSWER, citations: null }],
      stop_reason: "end_turn",
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: expect.objectContaining({
        input_tokens: prompt.length,
        // The answer's bytes and the end-of-turn token.
        output_tokens: ANSWER.length + 1,
      }),
    });
  });

  it("stops at a stop sequence and names it, and stops at max_tokens", async () => {
    const stopped = await anthropic.messages.create({ ...ask, stop_sequences: ["zzz", " on"] });
    expect([stopped.content, stopped.stop_reason, stopped.stop_sequence]).toEqual([
      [{ type: "text", text: "the cat sat", citations: null }],
      "stop_sequence",
      " on",
    ]);
    const short = await anthropic.messages.create({ ...ask, max_tokens: 5 });
    expect([short.content, short.stop_reason, short.usage.output_tokens]).toEqual([
      [{ type: "text", text: "the c", citations: null }],
      "max_tokens",
      5,
    ]);
  });

  it("streams with create({ stream: true }) and messages.stream().finalMessage() to the same message", async () => {
    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of await anthropic.messages.create({ ...ask, stream: true })) events.push(event);
    const text = events
      .map((e) => (e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : ""))
      .join("");
    expect(text).toBe(ANSWER);
    expect(events.at(-2)).toMatchObject({
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: ANSWER.length + 1 },
    });
    const stream = anthropic.messages.stream(ask);
    const deltas: string[] = [];
    stream.on("text", (delta) => deltas.push(delta));
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: "text", text: ANSWER, citations: null }]);
    expect(deltas.join("")).toBe(ANSWER);
    expect(final.stop_reason).toBe("end_turn");
  });

  it("writes server-sent events with event: and data: lines, a ping among them", async () => {
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": API_KEY, "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ ...ask, max_tokens: 3, stream: true }),
    });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const frames = (await response.text()).trim().split("\n\n");
    const names = frames.map((frame) => {
      const [event, data] = frame.split("\n");
      const name = event!.replace(/^event: /, "");
      expect(JSON.parse(data!.replace(/^data: /, "")).type).toBe(name);
      return name;
    });
    expect(names).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  it("counts a request's input tokens as messages.create reads them", async () => {
    const { model, messages } = ask;
    const counted = await anthropic.messages.countTokens({ model, messages, system: "be brief" });
    const created = await anthropic.messages.create({ ...ask, system: "be brief", max_tokens: 1 });
    expect(counted.input_tokens).toBe(created.usage.input_tokens);
    expect(counted.input_tokens).toBe(
      tokenizer.applyChatTemplate([{ role: "system", content: "be brief" }, CONVERSATION[0]!], {
        addGenerationPrompt: true,
      }).length,
    );
  });

  it("refuses a missing or wrong x-api-key with 401 authentication_error, never echoing the key", async () => {
    const wrong = await apiError(
      new Anthropic({ baseURL: url, apiKey: "sk-ant-wrong", maxRetries: 0 }).messages.create(ask),
    );
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
    expect([wrong.status, wrong.type]).toEqual([401, "authentication_error"]);
    expect(wrong.message).toMatch(/missing or wrong API key/);
    expect(wrong.message).not.toMatch(/sk-ant-wrong/);
    const none = await fetch(`${url}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect([none.status, await none.json()]).toEqual([
      401,
      { type: "error", error: { type: "authentication_error", message: expect.stringMatching(/X-API-Key/) } },
    ]);
  });

  it("answers an unknown model 404 not_found_error, other methods 405, and bad JSON 400, in Anthropic's shape", async () => {
    const unknown = await apiError(anthropic.messages.create({ ...ask, model: "nope" }));
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect([unknown.status, unknown.type]).toEqual([404, "not_found_error"]);
    expect(unknown.message).toMatch(/The model `nope` does not exist/);
    const get = await fetch(`${url}/v1/messages`, { headers: { "x-api-key": API_KEY } });
    expect([
      get.status,
      get.headers.get("allow"),
      ((await get.json()) as { error: { type: string } }).error.type,
    ]).toEqual([405, "POST", "invalid_request_error"]);
    const bad = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": API_KEY, "content-type": "application/json" },
      body: "{",
    });
    expect([bad.status, await bad.json()]).toEqual([
      400,
      {
        type: "error",
        error: { type: "invalid_request_error", message: expect.stringMatching(/not valid JSON/) },
      },
    ]);
  });
});
