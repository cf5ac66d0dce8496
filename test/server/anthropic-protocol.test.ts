import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { AnthropicMessages } from "../../src/server/anthropic-endpoints.js";
import {
  anthropicErrorType,
  anthropicMessages,
  anthropicRequestSchemas,
  messageBody,
  messageEvents,
  parseAnthropicRequest,
  sendAnthropicError,
} from "../../src/server/anthropic-protocol.js";
import { OpenAIEndpoints, type GenerationCall, type OpenAIGenerator } from "../../src/server/openai-endpoints.js";
import type { GeneratedChoice } from "../../src/server/openai-protocol.js";
import type { ChatTemplateOptions } from "../../src/wire/tokenizer.js";

const tokenizer = new ByteTokenizer();
const schemas = anthropicRequestSchemas("the test server");
/** A choice as a reasoning and tool-call parser leaves it: thinking split out, text, a call whose arguments keep their spacing. */
const REASONED: GeneratedChoice = {
  tokens: tokenizer.encode(
    '<think>plan it</think>ok<tool_call>{"name":"f","arguments":{"b": 1, "a": "x"}}</tool_call>',
  ),
  logprobs: [],
  text: "ok",
  finishReason: "tool_calls",
  stopReason: null,
  toolCalls: [{ id: "toolu_1", type: "function", function: { name: "f", arguments: '{"b": 1, "a": "x"}' } }],
  reasoning: "plan it",
};

/** What the test generator saw of each call. */
const seen: Array<{ options: ChatTemplateOptions; call: GenerationCall; toolCallId?: string }> = [];
let answer: GeneratedChoice = REASONED;
let server: Server;
let anthropic: Anthropic;

beforeAll(async () => {
  const endpoints = new OpenAIEndpoints({ server: "the test server", maxBodyBytes: 1 << 20, log: () => undefined });
  const messages = new AnthropicMessages(endpoints, "the test server");
  let options: ChatTemplateOptions = {};
  // A generator written for the test: it renders with the byte template and answers `answer`.
  const generator: OpenAIGenerator = {
    tokenizer,
    renderChat: (m, o) => {
      options = o;
      return tokenizer.applyChatTemplate(m, o);
    },
    generate: async (prompt, _request, call) => {
      seen.push({ options, call, ...(call.chat?.newToolCallId && { toolCallId: call.chat.newToolCallId() }) });
      return { promptTokens: prompt, choices: [answer] };
    },
  };
  server = createServer((req, res) => {
    void endpoints.answer(
      req,
      res,
      "/v1/messages",
      "POST",
      () => messages.create(req, res, () => generator),
      sendAnthropicError,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  anthropic = new Anthropic({
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: "k",
    maxRetries: 0,
  });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("Anthropic Messages: answers", () => {
  it("writes thinking first, then text, then tool_use with the parsed input, in the SDK's Message shape", () => {
    const body: Anthropic.Message = messageBody({ id: "msg_1", model: "m" }, [1, 2, 3], REASONED);
    expect(body.content).toEqual([
      { type: "thinking", thinking: "plan it", signature: expect.stringMatching(/^[\w-]{43}$/) },
      { type: "text", text: "ok", citations: null },
      { type: "tool_use", id: "toolu_1", name: "f", input: { b: 1, a: "x" }, caller: { type: "direct" } },
    ]);
    expect([body.stop_reason, body.stop_sequence, body.usage.input_tokens, body.usage.output_tokens]).toEqual([
      "tool_use",
      null,
      3,
      REASONED.tokens.length,
    ]);
  });

  it("streams thinking_delta, signature_delta, text_delta and input_json_delta events that the SDK adds up to the same message", async () => {
    const events = messageEvents({ id: "msg_1", model: "m" }, [1, 2, 3], REASONED, tokenizer);
    const deltas = events.filter((e) => e.event === "content_block_delta").map((e) => e.data.delta);
    expect(deltas).toEqual([
      { type: "thinking_delta", thinking: "plan it" },
      { type: "signature_delta", signature: expect.any(String) },
      { type: "text_delta", text: "ok" },
      { type: "input_json_delta", partial_json: '{"b": 1, "a": "x"}' },
    ]);
    answer = REASONED;
    const streamed = await anthropic.messages
      .stream({ model: "m", max_tokens: 99, messages: [{ role: "user", content: "go" }] })
      .finalMessage();
    const body = messageBody({ id: streamed.id, model: "m" }, [], REASONED);
    expect(streamed.content).toEqual(body.content);
    expect([streamed.stop_reason, streamed.usage.output_tokens]).toEqual(["tool_use", REASONED.tokens.length]);
  });

  it("maps statuses to Anthropic's error types", () => {
    expect([400, 401, 403, 404, 405, 410, 413, 429, 500, 503].map(anthropicErrorType)).toEqual([
      "invalid_request_error",
      "authentication_error",
      "permission_error",
      "not_found_error",
      "invalid_request_error",
      "not_found_error",
      "request_too_large",
      "rate_limit_error",
      "api_error",
      "overloaded_error",
    ]);
  });
});

describe("Anthropic Messages: requests", () => {
  it("translates system, text, tool_use and tool_result blocks into chat messages in their order", () => {
    const request = parseAnthropicRequest(
      schemas.create,
      {
        model: "m",
        max_tokens: 10,
        system: [
          { type: "text", text: "be ", cache_control: { type: "ephemeral" } },
          { type: "text", text: "brief" },
        ],
        messages: [
          { role: "user", content: "find b" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hmm", signature: "s" },
              { type: "text", text: "looking", citations: null },
              { type: "tool_use", id: "toolu_a", name: "f", input: { k: "b" } },
              { type: "tool_use", id: "toolu_b", name: "g", input: {} },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_a", content: "1" },
              { type: "tool_result", tool_use_id: "toolu_b", content: [{ type: "text", text: "no" }], is_error: true },
              { type: "text", text: "and" },
              { type: "text", text: " then?" },
            ],
          },
        ],
      },
      "the test server",
    );
    expect(anthropicMessages(request)).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "find b" },
      {
        role: "assistant",
        content: "looking",
        tool_calls: [
          { id: "toolu_a", type: "function", function: { name: "f", arguments: '{"k":"b"}' } },
          { id: "toolu_b", type: "function", function: { name: "g", arguments: "{}" } },
        ],
      },
      { role: "tool", content: "1", tool_call_id: "toolu_a", name: "f" },
      { role: "tool", content: "Error: no", tool_call_id: "toolu_b", name: "g" },
      { role: "user", content: "and then?" },
    ]);
  });

  it("refuses what it cannot do by name: top-level fields, strict tools, tool results with images, omitted thinking", () => {
    const base = { model: "m", max_tokens: 2000, messages: [{ role: "user", content: "x" }] };
    const refused = (body: object) => {
      try {
        parseAnthropicRequest(schemas.create, body, "the test server");
      } catch (error) {
        return [(error as { status: number }).status, (error as Error).message];
      }
      return undefined;
    };
    expect(refused({ ...base, mcp_servers: [], output_config: {} })).toEqual([
      400,
      "mcp_servers, output_config are not supported by the test server (MCP connectors run at Anthropic; call MCP tools from the agent; structured outputs and effort are not enforced on sampling); leave them out",
    ]);
    expect(refused({ ...base, tools: [{ name: "f", input_schema: { type: "object" }, strict: true }] })).toEqual([
      400,
      "tools[0].strict: strict tool inputs are not enforced by the test server; leave strict out",
    ]);
    expect(
      refused({
        ...base,
        messages: [
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: {} }] }],
          },
        ],
      }),
    ).toEqual([
      400,
      "messages[0].content[0].content[0].type: tool_result content must be a string or text blocks (images and documents are not supported)",
    ]);
    expect(refused({ ...base, thinking: { type: "enabled", budget_tokens: 1024, display: "omitted" } })).toEqual([
      400,
      'thinking.display: display "omitted" is not supported by the test server; leave display out',
    ]);
    expect(refused({ ...base, thinking: { type: "between_tools" } })).toEqual([
      400,
      "thinking.type: must be enabled, adaptive or disabled (between_tools is not supported by the test server)",
    ]);
    expect(refused({ ...base, messages: [{ role: "user", content: [{ type: "web_search_tool_result" }] }] })).toEqual([
      400,
      "messages[0].content[0].type: web_search_tool_result blocks belong to Anthropic's server tools, which the test server does not run; run tools in the agent and send tool_use / tool_result blocks",
    ]);
    expect(
      refused({
        ...base,
        tool_choice: { type: "tool", name: "g" },
        tools: [{ name: "f", input_schema: { type: "object" } }],
      }),
    ).toEqual([400, "tool_choice.name: names no tool of the request; name one of: f"]);
    expect(
      refused({ ...base, service_tier: "auto", metadata: { user_id: "u" }, cache_control: { type: "ephemeral" } }),
    ).toBe(undefined);
  });

  it("gives the chat template enable_thinking from thinking, its tools, and parses tools unless tool_choice is none", async () => {
    answer = { tokens: [104, 105], logprobs: [0, 0], text: "hi", finishReason: "stop", stopReason: null };
    const tools = [{ name: "f", description: "d", input_schema: { type: "object" as const, properties: {} } }];
    const body = { model: "m", max_tokens: 2048, messages: [{ role: "user" as const, content: "x" }], tools };
    await anthropic.messages.create({ ...body, thinking: { type: "enabled", budget_tokens: 1024 } });
    await anthropic.messages.create({ ...body, thinking: { type: "disabled" }, tool_choice: { type: "none" } });
    await anthropic.messages.create({ ...body, tool_choice: { type: "auto" } });
    const [enabled, disabled, plain] = seen.slice(-3);
    expect(enabled!.options).toEqual({
      addGenerationPrompt: true,
      tools: [{ type: "function", function: { name: "f", description: "d", parameters: tools[0]!.input_schema } }],
      chatTemplateKwargs: { enable_thinking: true },
    });
    expect(disabled!.options.chatTemplateKwargs).toEqual({ enable_thinking: false });
    expect(plain!.options.chatTemplateKwargs).toBeUndefined();
    expect(
      [enabled, disabled, plain].map((s) => [s!.call.chat!.parseTools, s!.call.chat!.dialect, s!.call.maxTokens]),
    ).toEqual([
      [true, "messages", 2048],
      [false, "messages", 2048],
      [true, "messages", 2048],
    ]);
    expect(enabled!.toolCallId).toMatch(/^toolu_[\w-]{24}$/);
  });
});
