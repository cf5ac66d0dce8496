import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { mergeCalls, ROLLOUT_ID_HEADER } from "../../src/agent/index.js";
import type { SamplerInferenceClient, VllmTokenIdFields } from "../../src/inference/index.js";
import { gateway, memorisingInference, recording, tinyInference, tokenizer, TOOL_CALL_TEXT } from "../support/agent.js";

type ChatChoice = OpenAI.ChatCompletion.Choice & VllmTokenIdFields;
type ChatResponse = OpenAI.ChatCompletion & VllmTokenIdFields;
const client = (baseURL: string) => new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "f",
      description: "looks k up",
      parameters: { type: "object", properties: { k: { type: "string" } } },
    },
  },
];

let memorised: SamplerInferenceClient;
beforeAll(async () => {
  memorised = await memorisingInference();
});

/** The OpenAI error a request fails with. */
async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await promise.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(OpenAI.APIError);
  return error as InstanceType<typeof OpenAI.APIError>;
}

describe("agent gateway: recording", () => {
  it("records a chat call token-exact: the prompt the chat template rendered, the ids and logprobs the sampler returned, and timing", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client, { maxTokensPerCall: 12 });
    expect(session.baseURL).toBe(`${g.url}/rollouts/${session.id}/v1`);
    expect(g.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const messages = [
      { role: "system" as const, content: "be brief" },
      { role: "user" as const, content: "hi" },
    ];
    const before = Date.now();
    const response = (await client(session.baseURL).chat.completions.create({
      model: "anything",
      messages,
      seed: 3,
      logprobs: true,
      return_token_ids: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)) as ChatResponse;
    const [call] = inference.calls;
    const choice = response.choices[0] as ChatChoice;
    expect(call!.prompt).toEqual(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
    expect(call!.options).toMatchObject({ maxTokens: 12, seed: 3 });
    expect(response.prompt_token_ids).toEqual(call!.result.promptTokens);
    expect(choice.token_ids).toEqual(call!.result.responseTokens);
    expect(choice.logprobs!.content!.map((e) => e.logprob)).toEqual(call!.result.logprobs);
    expect(choice.message.content).toBe(tokenizer.decode(call!.result.responseTokens));
    expect(response.model).toBe("anything");
    const trace = session.finish();
    expect(trace.rolloutId).toBe(session.id);
    expect(trace.calls).toHaveLength(1);
    const recorded = trace.calls[0]!;
    expect(recorded).toMatchObject({
      turn: 1,
      endpoint: "chat.completions",
      promptTokens: call!.result.promptTokens,
      completionTokens: call!.result.responseTokens,
      logprobs: call!.result.logprobs,
      finishReason: call!.result.finishReason,
      toolCalls: [],
      messages,
      policyVersion: 0,
    });
    expect(recorded.startedAt).toBeGreaterThanOrEqual(before);
    expect(recorded.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("serves completions (text with BOS, or token ids), lists the model, and takes the rollout id in a header", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client);
    const openai = client(session.baseURL);
    expect((await openai.models.list()).data.map((m) => m.id)).toEqual(["tiny"]);
    const text = await openai.completions.create({ model: "tiny", prompt: "ab", max_tokens: 4, seed: 1 });
    expect(inference.calls[0]!.prompt).toEqual(tokenizer.encode("ab", { addBos: true }));
    expect(text.choices[0]!.text).toBe(tokenizer.decode(inference.calls[0]!.result.responseTokens));
    await openai.completions.create({ model: "tiny", prompt: [256, 97], max_tokens: 3 });
    expect(inference.calls[1]!.prompt).toEqual([256, 97]);
    const viaHeader = client(`${g.url}/v1`);
    await viaHeader.completions.create(
      { model: "tiny", prompt: "c", max_tokens: 2 },
      { headers: { [ROLLOUT_ID_HEADER]: session.id } },
    );
    const trace = session.finish();
    expect(trace.calls.map((c) => [c.turn, c.endpoint, c.promptTokens])).toEqual([
      [1, "completions", tokenizer.encode("ab", { addBos: true })],
      [2, "completions", [256, 97]],
      [3, "completions", tokenizer.encode("c", { addBos: true })],
    ]);
  });

  it("gives every rollout a fresh random id", async () => {
    const g = await gateway();
    const inference = await tinyInference();
    const ids = Array.from({ length: 50 }, () => g.openRollout(inference).id);
    expect(new Set(ids).size).toBe(50);
    for (const id of ids) expect(id).toMatch(/^r-[A-Za-z0-9_-]{22}$/);
  });
});

describe("agent gateway: errors", () => {
  it("answers unknown, missing and finished rollouts with OpenAI error bodies", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const unknown = await apiError(
      client(`${g.url}/rollouts/r-guess/v1`).chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "x" }],
      }),
    );
    expect([unknown.status, unknown.code, unknown.type]).toEqual([404, "rollout_not_found", "invalid_request_error"]);
    expect(unknown.message).toMatch(/unknown rollout `r-guess`/);
    const missing = await apiError(
      client(`${g.url}/v1`).chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "x" }] }),
    );
    expect([missing.status, missing.code]).toEqual([400, "rollout_missing"]);
    expect(missing.message).toMatch(/x-nexrl-rollout-id/);
    session.finish();
    const done = await apiError(
      client(session.baseURL).completions.create({ model: "tiny", prompt: "x", max_tokens: 2 }),
    );
    expect([done.status, done.code]).toEqual([410, "rollout_finished"]);
    expect(done.message).toMatch(new RegExp(`rollout \`${session.id}\` has finished`));
    const header = await apiError(
      client(`${g.url}/v1`).completions.create(
        { model: "tiny", prompt: "x" },
        { headers: { [ROLLOUT_ID_HEADER]: session.id } },
      ),
    );
    expect(header.status).toBe(410);
  });

  it("answers malformed requests with 400 naming the parameter, and records nothing for them", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const openai = client(session.baseURL);
    const cases: Array<[Promise<unknown>, string | null, RegExp]> = [
      [openai.chat.completions.create({ model: "tiny", messages: [] }), "messages", /messages: .*>=1/],
      [
        openai.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: 3 }] } as never),
        "messages[0].content",
        /messages\[0\]\.content/,
      ],
      [
        openai.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "x" }], n: 2 }),
        "n",
        /one choice per call/,
      ],
      [openai.completions.create({ model: "tiny", prompt: "x", temperature: -1 }), "temperature", /temperature: .*>=0/],
      [openai.completions.create({ model: "tiny", prompt: ["a", "b"] }), "prompt", /one prompt per call/],
      [
        openai.completions.create({ model: "tiny", prompt: "x", presence_penalty: 1 }),
        "presence_penalty",
        /not supported by the nexrl agent gateway/,
      ],
      [openai.completions.create({ model: "tiny", prompt: "x".repeat(200) }), null, /context length is 128/],
    ];
    for (const [request, param, message] of cases) {
      const error = await apiError(request);
      expect([error.status, error.param]).toEqual([400, param]);
      expect(error.message).toMatch(message);
    }
    const bad = await fetch(`${session.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{ nope",
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /^the request body is not valid JSON/,
    );
    const get = await fetch(`${session.baseURL}/chat/completions`);
    expect([get.status, get.headers.get("allow")]).toEqual([405, "POST"]);
    const other = await fetch(`${g.url}/elsewhere`);
    expect([other.status, ((await other.json()) as { error: { code: string } }).error.code]).toEqual([
      404,
      "not_found",
    ]);
    const trace = session.finish();
    expect(trace.calls).toEqual([]);
    // Each refused request of the rollout is counted (the 404 at /elsewhere names no rollout).
    expect(trace.failedRequests?.count).toBe(cases.length + 2);
    expect(trace.failedRequests?.first).toMatch(/^400 /);
  });

  it("notes a rollout's failed requests, under a wrong path or by header, its id written as a placeholder", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const lostV1 = await fetch(`${g.url}/rollouts/${session.id}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(lostV1.status).toBe(404);
    await client(session.baseURL).completions.create({ model: "tiny", prompt: "a", max_tokens: 2 });
    const wrongMethod = await fetch(`${g.url}/v1/completions`, { headers: { [ROLLOUT_ID_HEADER]: session.id } });
    expect(wrongMethod.status).toBe(405);
    const trace = session.finish();
    expect(trace.calls).toHaveLength(1);
    expect(trace.failedRequests).toEqual({
      count: 2,
      first: expect.stringMatching(
        /^404 no route POST \/rollouts\/\{rolloutId\}\/chat\/completions; the gateway serves \/rollouts\/\{rolloutId\}\/v1\/\{models,completions,chat\/completions[,}]/,
      ),
    });
    expect(g.openRollout(await tinyInference()).finish().failedRequests).toBeUndefined();
  });

  it("refuses calls past the turn and token limits and truncates the episode", async () => {
    const g = await gateway();
    const inference = await tinyInference();
    const turns = g.openRollout(inference, { maxTurns: 2 });
    const openai = client(turns.baseURL);
    await openai.completions.create({ model: "tiny", prompt: "a", max_tokens: 2 });
    await openai.completions.create({ model: "tiny", prompt: "b", max_tokens: 2 });
    const third = await apiError(openai.completions.create({ model: "tiny", prompt: "c", max_tokens: 2 }));
    expect([third.status, third.code]).toEqual([400, "rollout_limit_reached"]);
    expect(third.message).toMatch(/made its 2 model calls \(rollout_worker\.agent\.max_turns\)/);
    expect(turns.finish()).toMatchObject({ calls: [{ turn: 1 }, { turn: 2 }], truncation: { reason: "max_turns" } });

    const rec = recording(inference);
    const tokens = g.openRollout(rec.client, { maxTokens: 10, maxTokensPerCall: 6 });
    const capped = client(tokens.baseURL);
    const first = await capped.completions.create({ model: "tiny", prompt: "a", max_tokens: 50, seed: 1 });
    const second = await capped.completions.create({ model: "tiny", prompt: "a", max_tokens: 50, seed: 2 });
    expect(rec.calls.map((c) => c.options.maxTokens)).toEqual([6, 4]);
    expect([first.usage!.completion_tokens, second.usage!.completion_tokens, second.choices[0]!.finish_reason]).toEqual(
      [6, 4, "length"],
    );
    const out = await apiError(capped.completions.create({ model: "tiny", prompt: "a", max_tokens: 1 }));
    expect([out.status, out.code]).toEqual([400, "rollout_limit_reached"]);
    expect(out.message).toMatch(/sampled its 10 tokens \(rollout_worker\.agent\.max_tokens\)/);
    expect(tokens.finish().truncation?.reason).toBe("max_tokens");
  });
});

describe("agent gateway: streaming", () => {
  it("streams chat chunks whose text, ids and logprobs add up to the recorded call", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client, { maxTokensPerCall: 16 });
    const stream = await client(session.baseURL).chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "hello" }],
      seed: 9,
      logprobs: true,
      return_token_ids: true,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: Array<OpenAI.ChatCompletionChunk & VllmTokenIdFields> = [];
    for await (const chunk of stream) chunks.push(chunk);
    const deltas = chunks.flatMap((c) => c.choices as Array<OpenAI.ChatCompletionChunk.Choice & VllmTokenIdFields>);
    const [call] = session.finish().calls;
    expect(chunks[0]!.prompt_token_ids).toEqual(call!.promptTokens);
    expect(deltas.flatMap((d) => d.token_ids ?? [])).toEqual(call!.completionTokens);
    expect(deltas.flatMap((d) => d.logprobs?.content?.map((e) => e.logprob) ?? [])).toEqual(call!.logprobs);
    expect(deltas.map((d) => d.delta.content ?? "").join("")).toBe(tokenizer.decode(call!.completionTokens));
    expect(deltas.at(-1)!.finish_reason).toBe(call!.finishReason);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(call!.completionTokens.length);
  });
});

describe("agent gateway: tool calls", () => {
  it("parses a tool call out of the generated text and renders it back so that the next prompt continues the last one", async () => {
    const g = await gateway();
    const inference = recording(memorised);
    const session = g.openRollout(inference.client, { maxTokensPerCall: 80 });
    const openai = client(session.baseURL);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "find a" }];
    const first = await openai.chat.completions.create({ model: "tiny", messages, tools: TOOLS, temperature: 0 });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/), type: "function", function: { name: "f", arguments: '{"k":"a"}' } },
    ]);
    messages.push(choice.message, { role: "tool", tool_call_id: choice.message.tool_calls![0]!.id, content: "7" });
    const second = await openai.chat.completions.create({ model: "tiny", messages, tools: TOOLS, temperature: 0 });
    expect([second.choices[0]!.message.content, second.choices[0]!.finish_reason]).toEqual(["7", "stop"]);
    const trace = session.finish();
    const [a, b] = trace.calls;
    expect(tokenizer.decode(a!.completionTokens)).toBe(TOOL_CALL_TEXT);
    expect(a!.toolCalls.map((c) => c.function)).toEqual([{ name: "f", arguments: '{"k":"a"}' }]);
    expect(b!.promptTokens.slice(0, a!.promptTokens.length + a!.completionTokens.length)).toEqual([
      ...a!.promptTokens,
      ...a!.completionTokens,
    ]);
    const merged = mergeCalls(trace.calls, tokenizer);
    expect(merged.breaks).toEqual([]);
    expect(merged.sequences).toHaveLength(1);
    expect(merged.sequences[0]!.tokens).toEqual([...b!.promptTokens, ...b!.completionTokens]);
  });

  it("leaves tool calls in the text when the request has no tools or tool_choice is none, and streams parsed calls", async () => {
    const g = await gateway();
    const session = g.openRollout(memorised, { maxTokensPerCall: 80 });
    const openai = client(session.baseURL);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "find a" }];
    const plain = await openai.chat.completions.create({ model: "tiny", messages, temperature: 0 });
    expect([plain.choices[0]!.message.content, plain.choices[0]!.message.tool_calls]).toEqual([
      TOOL_CALL_TEXT,
      undefined,
    ]);
    const none = await openai.chat.completions.create({
      model: "tiny",
      messages,
      tools: TOOLS,
      tool_choice: "none",
      temperature: 0,
    });
    expect(none.choices[0]!.finish_reason).toBe("stop");
    const stream = await openai.chat.completions.create({
      model: "tiny",
      messages,
      tools: TOOLS,
      temperature: 0,
      stream: true,
    });
    const calls: Array<{ id?: string; name?: string; arguments?: string }> = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const call of c.delta.tool_calls ?? [])
          calls.push({ id: call.id, name: call.function?.name, arguments: call.function?.arguments });
        finish = c.finish_reason ?? finish;
      }
    }
    expect(calls).toEqual([{ id: expect.stringMatching(/^call_/), name: "f", arguments: '{"k":"a"}' }]);
    expect(finish).toBe("tool_calls");
    expect(session.finish().calls.map((c) => c.finishReason)).toEqual(["stop", "stop", "tool_calls"]);
  });
});
