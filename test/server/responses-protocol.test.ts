import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import type { GeneratedChoice } from "../../src/server/openai-protocol.js";
import {
  inputMessages,
  responseEvents,
  responseObject,
  responseOutput,
  responsesRequestSchema,
  responseUsage,
  sendResponseEvents,
  type ResponseObject,
} from "../../src/server/responses-protocol.js";
import { ResponseStore } from "../../src/server/responses-store.js";
import { parseOpenAIRequest } from "../../src/server/openai-protocol.js";

const tokenizer = new ByteTokenizer();
const schema = responsesRequestSchema("the test server");
const parse = (body: unknown) => parseOpenAIRequest(schema, body);
const call = (id: string, name: string, args: string) => ({
  id,
  type: "function" as const,
  function: { name, arguments: args },
});

/** A choice as the gateway makes it once a reasoning parser split `<think>` out and a tool call was parsed. */
function reasoningChoice(): GeneratedChoice {
  const generated = '<think>look it up</think>checking<tool_call>{"name":"f","arguments":{"k":"a"}}</tool_call>';
  const tokens = tokenizer.encode(generated);
  return {
    tokens,
    logprobs: tokens.map(() => -0.5),
    text: "checking",
    reasoning: "look it up",
    toolCalls: [call("call_1", "f", '{"k":"a"}')],
    finishReason: "tool_calls",
    stopReason: null,
  };
}

const closers: Array<() => void> = [];
afterEach(() => closers.splice(0).forEach((close) => close()));

describe("Responses input items → chat messages", () => {
  it("joins an assistant turn's reasoning, message and function calls into one assistant message, outputs into tool messages", () => {
    const request = parse({
      model: "m",
      input: [
        { role: "developer", content: "rules" },
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "a" },
            { type: "input_text", text: "b" },
          ],
        },
        { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "hmm" }] },
        {
          type: "message",
          role: "assistant",
          id: "msg_1",
          content: [{ type: "output_text", text: "on it", annotations: [] }],
        },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "{}" },
        { type: "function_call", id: "fc_2", call_id: "call_2", name: "g", arguments: '{"x":1}' },
        { type: "function_call_output", call_id: "call_1", output: "1" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "2" }] },
        { type: "function_call", call_id: "call_3", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "call_3", output: "3" },
        { role: "assistant", content: "first" },
        { role: "assistant", content: "second" },
        { role: "user", content: "thanks" },
      ],
    });
    expect(inputMessages(request.input, () => expect.unreachable())).toEqual([
      { role: "system", content: "rules" },
      { role: "user", content: "ab" },
      { role: "assistant", content: "on it", tool_calls: [call("call_1", "f", "{}"), call("call_2", "g", '{"x":1}')] },
      { role: "tool", content: "1", tool_call_id: "call_1" },
      { role: "tool", content: "2", tool_call_id: "call_2" },
      { role: "assistant", content: "", tool_calls: [call("call_3", "f", "{}")] },
      { role: "tool", content: "3", tool_call_id: "call_3" },
      { role: "assistant", content: "first" },
      { role: "assistant", content: "second" },
      { role: "user", content: "thanks" },
    ]);
    expect(inputMessages(parse({ model: "m", input: "hi" }).input, () => expect.unreachable())).toEqual([
      { role: "user", content: "hi" },
    ]);
  });

  it("looks item_reference items up, naming the parameter", () => {
    const request = parse({
      model: "m",
      input: [
        { role: "user", content: "q" },
        { type: "item_reference", id: "fc_9" },
      ],
    });
    const seen: string[] = [];
    const messages = inputMessages(request.input, (id, param) => {
      seen.push(`${id} ${param}`);
      return { type: "function_call", id, call_id: "call_9", name: "f", arguments: "{}" };
    });
    expect(seen).toEqual(["fc_9 input[1].id"]);
    expect(messages[1]).toEqual({ role: "assistant", content: "", tool_calls: [call("call_9", "f", "{}")] });
  });
});

describe("a choice → Responses output", () => {
  it("puts the reasoning item before the message and the function calls, counts reasoning tokens, and streams it so that the openai client rebuilds it", async () => {
    const choice = reasoningChoice();
    const output = responseOutput(choice);
    expect(output).toEqual([
      {
        id: expect.stringMatching(/^rs_/),
        type: "reasoning",
        summary: [],
        content: [{ type: "reasoning_text", text: "look it up" }],
        status: "completed",
      },
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "checking", annotations: [], logprobs: [] }],
      },
      {
        id: expect.stringMatching(/^fc_/),
        type: "function_call",
        call_id: "call_1",
        name: "f",
        arguments: '{"k":"a"}',
        status: "completed",
      },
    ]);
    const usage = responseUsage(tokenizer, 10, choice);
    // "<think>look it up" is 17 bytes, one token each with the byte tokenizer.
    expect(usage).toMatchObject({
      output_tokens: choice.tokens.length,
      output_tokens_details: { reasoning_tokens: 17 },
    });
    const body = responseObject(parse({ model: "m", input: "q" }), "resp_1", 1, output, usage);
    const events = responseEvents(body, ["check", "ing"]);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const final = await streamedThroughClient(body, ["check", "ing"]);
    expect(final.output).toMatchObject(body.output);
    expect(final.output_text).toBe("checking");
    expect(final.usage).toEqual(usage);
  });

  it("marks an answer cut by max_output_tokens incomplete, and answers a tool-call-only choice with function calls alone", () => {
    const cut: GeneratedChoice = {
      ...reasoningChoice(),
      reasoning: undefined,
      toolCalls: [],
      text: "abc",
      finishReason: "length",
    };
    delete cut.reasoning;
    const output = responseOutput(cut);
    expect(output.map((item) => [item.type, item.status])).toEqual([["message", "incomplete"]]);
    const body = responseObject(
      parse({ model: "m", input: "q" }),
      "resp_2",
      1,
      output,
      responseUsage(tokenizer, 3, cut),
    );
    expect([body.status, body.incomplete_details, body.completed_at]).toEqual([
      "incomplete",
      { reason: "max_output_tokens" },
      null,
    ]);
    expect(responseEvents(body, []).at(-1)!.type).toBe("response.incomplete");
    const callsOnly: GeneratedChoice = { ...reasoningChoice(), text: "" };
    delete callsOnly.reasoning;
    expect(responseOutput(callsOnly).map((item) => item.type)).toEqual(["function_call"]);
  });
});

/** `body` streamed by a small server written for the test, read back with the openai client's responses.stream. */
async function streamedThroughClient(body: ResponseObject, pieces: string[]): Promise<OpenAI.Responses.Response> {
  const server = createServer((_req, res) => sendResponseEvents(res, responseEvents(body, pieces)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => server.close());
  const openai = new OpenAI({
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    apiKey: "unused",
    maxRetries: 0,
  });
  return openai.responses.stream({ model: "m", input: "q" }).finalResponse();
}

describe("ResponseStore", () => {
  it("keeps the most recently used responses and their output items, dropping the least recently used", () => {
    const store = new ResponseStore(2);
    const stored = (id: string) => ({
      response: responseObject(
        parse({ model: "m", input: "q" }),
        id,
        1,
        responseOutput(reasoningChoice()),
        responseUsage(tokenizer, 1, reasoningChoice()),
      ),
      conversation: [{ role: "user", content: id }],
    });
    const [a, b, c] = [stored("resp_a"), stored("resp_b"), stored("resp_c")];
    store.put(a);
    store.put(b);
    expect(store.get("resp_a")).toBe(a);
    store.put(c);
    expect([store.size, store.get("resp_b"), store.get("resp_a")?.response.id]).toEqual([2, undefined, "resp_a"]);
    expect(store.item(b.response.output[2]!.id!)).toBeUndefined();
    expect(store.item(a.response.output[2]!.id!)).toEqual(a.response.output[2]);
    expect([store.delete("resp_a"), store.delete("resp_a"), store.item(a.response.output[0]!.id!)]).toEqual([
      true,
      false,
      undefined,
    ]);
  });
});
