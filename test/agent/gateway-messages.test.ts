import Anthropic from "@anthropic-ai/sdk";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentGateway, mergeCalls, ROLLOUT_ID_HEADER, type RolloutSession } from "../../src/agent/index.js";
import { answeredArguments } from "../../src/agent/render.js";
import type { SamplerInferenceClient } from "../../src/inference/index.js";
import {
  gateway,
  memorisingInference,
  onCleanup,
  recording,
  tinyInference,
  tokenizer,
  TOOL_CALL_TEXT,
} from "../support/agent.js";

/** The SDK pointed at a rollout: its base URL without `/v1`, which the SDK adds. */
const client = (session: RolloutSession, apiKey = "unused") =>
  new Anthropic({ baseURL: session.baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0 });
const TOOLS: Anthropic.Tool[] = [
  { name: "f", description: "looks k up", input_schema: { type: "object", properties: { k: { type: "string" } } } },
];
/** Sampling fields the SDK's types no longer list but the API takes. */
const greedy = { temperature: 0 } as object;

let memorised: SamplerInferenceClient;
beforeAll(async () => {
  memorised = await memorisingInference();
});

/** The SDK error a request fails with. */
async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const error = await promise.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(Anthropic.APIError);
  return error as InstanceType<typeof Anthropic.APIError>;
}

describe("agent gateway: Anthropic Messages", () => {
  it("answers messages.create with the recorded call's text and usage, recorded as endpoint messages", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client);
    const message = await client(session).messages.create({
      model: "claude-anything",
      max_tokens: 9,
      system: [{ type: "text", text: "be brief" }],
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      metadata: { user_id: "u1" },
      ...({ top_k: 5 } as object),
    } as Anthropic.MessageCreateParamsNonStreaming);
    const [call] = inference.calls;
    expect(call!.prompt).toEqual(
      tokenizer.applyChatTemplate(
        [
          { role: "system", content: "be brief" },
          { role: "user", content: "hi" },
        ],
        { addGenerationPrompt: true },
      ),
    );
    expect(call!.options).toMatchObject({ maxTokens: 9, topK: 5 });
    expect(message.id).toMatch(/^msg_/);
    expect(message.model).toBe("claude-anything");
    expect(message.content).toEqual([
      { type: "text", text: tokenizer.decode(call!.result.responseTokens), citations: null },
    ]);
    expect(message.stop_reason).toBe(call!.result.finishReason === "length" ? "max_tokens" : "end_turn");
    expect([message.usage.input_tokens, message.usage.output_tokens]).toEqual([
      call!.result.promptTokens.length,
      call!.result.responseTokens.length,
    ]);
    const [recorded] = session.finish().calls;
    expect(recorded).toMatchObject({
      endpoint: "messages",
      promptTokens: call!.result.promptTokens,
      completionTokens: call!.result.responseTokens,
    });
  });

  it("refuses unsupported fields and blocks with 400s naming them, and records nothing for them", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const anthropic = client(session);
    const base = { model: "m", max_tokens: 4, messages: [{ role: "user" as const, content: "x" }] };
    const cases: Array<[object, RegExp]> = [
      [{ ...base, container: "c1" }, /^container is not supported by the nexrl agent gateway \(code execution/],
      [{ ...base, max_tokens: undefined }, /^max_tokens: /],
      [
        { ...base, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "u" } }] }] },
        /^messages\[0\]\.content\[0\]\.type: image blocks are not supported .* text only/,
      ],
      [
        { ...base, messages: [{ role: "user", content: [{ type: "redacted_thinking", data: "x" }] }] },
        /redacted_thinking blocks hold reasoning encrypted by Anthropic/,
      ],
      [
        { ...base, tools: [{ type: "web_search_20250305", name: "web_search" }] },
        /^tools\[0\]\.type: only custom tools/,
      ],
      [{ ...base, messages: [...base.messages, { role: "assistant", content: "{" }] }, /prefill\) is not supported/],
      [
        { ...base, thinking: { type: "enabled", budget_tokens: 2048 } },
        /^thinking\.budget_tokens: must be less than max_tokens \(4\)/,
      ],
      [{ ...base, temperature: 1.5 }, /^temperature: /],
      [{ ...base, seed: 3 }, /^seed is not supported by the nexrl agent gateway; leave it out/],
    ];
    for (const [body, message] of cases) {
      const error = await apiError(anthropic.messages.create(body as Anthropic.MessageCreateParamsNonStreaming));
      expect([error.status, error.type, error.error]).toEqual([
        400,
        "invalid_request_error",
        { type: "error", error: { type: "invalid_request_error", message: expect.stringMatching(message) } },
      ]);
      expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    }
    expect(session.finish().calls).toHaveLength(0);
  });

  it("answers unknown and finished rollouts in Anthropic's error shape, and takes the rollout id in a header", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const body = { model: "m", max_tokens: 2, messages: [{ role: "user" as const, content: "x" }] };
    const unknown = await apiError(
      new Anthropic({ baseURL: `${g.url}/rollouts/r-guess`, apiKey: "k", maxRetries: 0 }).messages.create(body),
    );
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect([unknown.status, unknown.type, unknown.message]).toEqual([
      404,
      "not_found_error",
      expect.stringMatching(/unknown rollout `r-guess`/),
    ]);
    const viaHeader = new Anthropic({ baseURL: g.url, apiKey: "k", maxRetries: 0 });
    await viaHeader.messages.create(body, { headers: { [ROLLOUT_ID_HEADER]: session.id } });
    const missing = await apiError(viaHeader.messages.create(body));
    expect([missing.status, missing.type]).toEqual([400, "invalid_request_error"]);
    expect(session.finish().calls.map((c) => c.endpoint)).toEqual(["messages"]);
    const doubled = await apiError(
      new Anthropic({ baseURL: session.baseURL, apiKey: "k", maxRetries: 0 }).messages.create(body),
    );
    expect([doubled.status, doubled.type, doubled.message]).toEqual([
      404,
      "not_found_error",
      expect.stringMatching(
        /\/v1\/v1\/messages \(the Anthropic SDK adds \/v1 itself: give it the rollout's base URL without the trailing \/v1\)/,
      ),
    ]);
    const done = await apiError(client(session).messages.create(body));
    expect([done.status, done.type]).toEqual([410, "not_found_error"]);
  });

  it("answers a failing model 500 api_error (logged) and a body past the limit 413 request_too_large", async () => {
    const logged: string[] = [];
    const g = await AgentGateway.start({ maxBodyBytes: 400, log: (line) => logged.push(line) });
    onCleanup(() => g.close());
    const tiny = await tinyInference();
    const session = g.openRollout({
      tokenizer: tiny.tokenizer,
      completion: () => Promise.reject(new Error("the GPU caught fire")),
      chat: () => Promise.reject(new Error("unused")),
    });
    const anthropic = client(session);
    const failed = await apiError(
      anthropic.messages.create({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "x" }] }),
    );
    expect(failed).toBeInstanceOf(Anthropic.InternalServerError);
    expect([failed.status, failed.type, failed.message]).toEqual([
      500,
      "api_error",
      expect.stringMatching(/the model failed: the GPU caught fire/),
    ]);
    expect(logged).toEqual([
      expect.stringMatching(
        /^nexrl agent gateway: POST \/rollouts\/.*\/v1\/messages failed: Error: the GPU caught fire/,
      ),
    ]);
    const large = await apiError(
      anthropic.messages.create({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "x".repeat(500) }] }),
    );
    expect([large.status, large.type]).toEqual([413, "request_too_large"]);
    expect(session.finish().calls).toHaveLength(0);
  });

  it("streams message events whose text adds up to the recorded call, with create({stream}) and messages.stream", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference(), { maxTokensPerCall: 16 });
    const anthropic = client(session);
    const body = {
      model: "m",
      max_tokens: 12,
      messages: [{ role: "user" as const, content: "hello" }],
      ...greedy,
    } as Anthropic.MessageCreateParamsNonStreaming;
    const stream = await anthropic.messages.create({ ...body, stream: true });
    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      ...events.filter((e) => e.type === "content_block_delta").map(() => "content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const text = events.map((e) =>
      e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "",
    );
    const final = await anthropic.messages.stream(body).finalMessage();
    const [first, second] = session.finish().calls;
    expect(text.join("")).toBe(tokenizer.decode(first!.completionTokens));
    // One text delta per token when the text is all the answer holds.
    expect(text.filter((t) => t !== "").length).toBe(first!.completionTokens.length);
    const delta = events.find((e) => e.type === "message_delta")!;
    expect(delta.usage.output_tokens).toBe(first!.completionTokens.length);
    expect(final.content).toEqual([
      { type: "text", text: tokenizer.decode(second!.completionTokens), citations: null },
    ]);
    expect(final.usage.output_tokens).toBe(second!.completionTokens.length);
    expect(final.usage.input_tokens).toBe(second!.promptTokens.length);
  });

  it("counts the tokens of the prompt a request renders to, without recording a call", async () => {
    const g = await gateway();
    const session = g.openRollout(await tinyInference());
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "count me" }];
    const counted = await client(session).messages.countTokens({ model: "m", system: "s", messages });
    expect(counted.input_tokens).toBe(
      tokenizer.applyChatTemplate(
        [
          { role: "system", content: "s" },
          { role: "user", content: "count me" },
        ],
        { addGenerationPrompt: true },
      ).length,
    );
    expect(session.finish().calls).toHaveLength(0);
  });

  it("runs a client-driven tool loop as one trajectory with no prefix break, non-streamed and streamed", async () => {
    for (const streamed of [false, true]) {
      const g = await gateway();
      const inference = recording(memorised);
      const session = g.openRollout(inference.client, { maxTokensPerCall: 80 });
      const anthropic = client(session);
      const ask = (messages: Anthropic.MessageParam[]) => {
        const body = { model: "m", max_tokens: 80, tools: TOOLS, messages, ...greedy };
        return streamed ? anthropic.messages.stream(body).finalMessage() : anthropic.messages.create(body);
      };
      const messages: Anthropic.MessageParam[] = [{ role: "user", content: "find a" }];
      const first = await ask(messages);
      expect(first.stop_reason).toBe("tool_use");
      expect(first.content).toEqual([
        {
          type: "tool_use",
          id: expect.stringMatching(/^toolu_/),
          name: "f",
          input: { k: "a" },
          caller: { type: "direct" },
        },
      ]);
      const use = first.content[0] as Anthropic.ToolUseBlock;
      messages.push(
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: "7" }] }],
        },
      );
      const second = await ask(messages);
      expect([second.content, second.stop_reason]).toEqual([
        [{ type: "text", text: "7", citations: null }],
        "end_turn",
      ]);
      const trace = session.finish();
      const [a, b] = trace.calls;
      expect(tokenizer.decode(a!.completionTokens)).toBe(TOOL_CALL_TEXT);
      expect(a!.toolCalls).toEqual([{ id: use.id, type: "function", function: { name: "f", arguments: '{"k":"a"}' } }]);
      expect(b!.messages![1]).toEqual({ role: "assistant", content: "", tool_calls: a!.toolCalls });
      expect(b!.messages![2]).toEqual({ role: "tool", content: "7", tool_call_id: use.id, name: "f" });
      expect(trace.calls.map((c) => c.endpoint)).toEqual(["messages", "messages"]);
      const merged = mergeCalls(trace.calls, tokenizer);
      expect(merged.breaks).toEqual([]);
      expect(merged.sequences).toHaveLength(1);
      expect(merged.sequences[0]!.tokens).toEqual([...b!.promptTokens, ...b!.completionTokens]);
    }
  });
});

describe("agent gateway: tool_use blocks sent back", () => {
  it("take the arguments text the model wrote when id, name and input match an answered call, else compact JSON", () => {
    // Integer-like keys come first in a parsed object, so JSON.stringify(input) would reorder them.
    const written = '{"b": 1, "2": [true], "a": {"c": null}}';
    const call = { id: "toolu_x", type: "function" as const, function: { name: "f", arguments: written } };
    const argumentsOf = answeredArguments([{ content: "", toolCalls: [call], generated: "", tokens: [] }]);
    const input = JSON.parse(written) as Record<string, unknown>;
    expect(JSON.stringify(input)).not.toBe(written);
    expect(argumentsOf({ id: "toolu_x", name: "f", input })).toBe(written);
    expect(argumentsOf({ id: "toolu_x", name: "f", input: { ...input, b: 2 } })).toBe(
      '{"2":[true],"b":2,"a":{"c":null}}',
    );
    expect(argumentsOf({ id: "toolu_y", name: "f", input })).toBe(JSON.stringify(input));
    expect(argumentsOf({ id: "toolu_x", name: "g", input })).toBe(JSON.stringify(input));
  });
});
