import OpenAI from "openai";
import { beforeEach, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import type { ChatMessage } from "../../src/wire/tokenizer.js";
import { server } from "../support/server.js";

const tokenizer = new ByteTokenizer();
let base: string;
let openai: OpenAI;

// helpers' server() closes its server after each test.
beforeEach(async () => {
  base = (await server()).url;
  openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
});

/** The text chat completions answers for `messages` at temperature 0: what a response must say too. */
async function chatAnswer(messages: ChatMessage[], maxTokens: number): Promise<string> {
  const chat = await openai.chat.completions.create({
    model: "tiny",
    messages: messages as OpenAI.ChatCompletionMessageParam[],
    max_tokens: maxTokens,
    temperature: 0,
  });
  return chat.choices[0]!.message.content ?? "";
}

/** The OpenAI error a request fails with. */
async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await promise.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(OpenAI.APIError);
  return error as InstanceType<typeof OpenAI.APIError>;
}

describe("nexrl serve: the Responses API through the openai client", () => {
  it("answers responses.create with the chat the input and instructions make, its usage and OpenAI's response shape", async () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
    ];
    const response = await openai.responses.create({
      model: "tiny",
      instructions: "be brief",
      input: "hi",
      max_output_tokens: 6,
      temperature: 0,
      metadata: { task: "t1" },
    });
    const text = await chatAnswer(messages, 6);
    expect(response.output_text).toBe(text);
    expect(response).toMatchObject({
      object: "response",
      model: "tiny",
      instructions: "be brief",
      metadata: { task: "t1" },
      max_output_tokens: 6,
      temperature: 0,
      tool_choice: "auto",
      tools: [],
      error: null,
      previous_response_id: null,
      text: { format: { type: "text" } },
    });
    expect(response.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(response.output).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "assistant",
        status: response.status,
        content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
      },
    ]);
    const prompt = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }).length;
    const sampled = response.usage!.output_tokens;
    expect(response.usage).toEqual({
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: sampled,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: prompt + sampled,
    });
    // The untrained model rarely stops within 6 tokens: then the answer is incomplete, as OpenAI says it.
    if (sampled === 6) {
      expect([response.status, response.incomplete_details]).toEqual(["incomplete", { reason: "max_output_tokens" }]);
    } else {
      expect([response.status, response.incomplete_details]).toEqual(["completed", null]);
    }
  });

  it("streams the full event sequence, numbered, whose deltas spell the text, and retrieves the stored response", async () => {
    const stream = await openai.responses.create({
      model: "tiny",
      input: [{ role: "user", content: [{ type: "input_text", text: "hello" }] }],
      max_output_tokens: 12,
      temperature: 0,
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...deltas.map(() => "response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      expect.stringMatching(/^response\.(completed|incomplete)$/),
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const last = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    const text = await chatAnswer([{ role: "user", content: "hello" }], 12);
    expect(deltas.map((d) => d.delta).join("")).toBe(text);
    expect(last.response.output).toMatchObject([{ type: "message", content: [{ type: "output_text", text }] }]);
    expect((events[0] as OpenAI.Responses.ResponseCreatedEvent).response).toMatchObject({
      id: last.response.id,
      status: "in_progress",
      output: [],
    });
    const retrieved = await openai.responses.retrieve(last.response.id);
    expect(retrieved.output).toEqual(last.response.output);
    expect(retrieved.usage).toEqual(last.response.usage);
    const raw = await (
      await fetch(`${base}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "tiny", input: "x", max_output_tokens: 2, stream: true }),
      })
    ).text();
    expect(raw).toMatch(/^event: response\.created\ndata: \{"type":"response\.created","response":\{"id":"resp_/);
    expect(raw).not.toContain("[DONE]");
  });

  it("gives responses.stream's finalResponse the response create answers", async () => {
    const streamed = await openai.responses
      .stream({ model: "tiny", input: "abc", max_output_tokens: 8, temperature: 0 })
      .finalResponse();
    const whole = await openai.responses.create({ model: "tiny", input: "abc", max_output_tokens: 8, temperature: 0 });
    expect(streamed.output_text).toBe(whole.output_text);
    expect(streamed.output_text).toBe(await chatAnswer([{ role: "user", content: "abc" }], 8));
    expect(streamed.usage).toEqual(whole.usage);
    expect(streamed.status).toBe(whole.status);
  });

  it("continues a stored response with previous_response_id (without its instructions), and forgets it on DELETE", async () => {
    const first = await openai.responses.create({
      model: "tiny",
      instructions: "old rules",
      input: "ab",
      max_output_tokens: 4,
      temperature: 0,
    });
    const second = await openai.responses.create({
      model: "tiny",
      previous_response_id: first.id,
      input: [{ role: "user", content: "cd" }],
      max_output_tokens: 4,
      temperature: 0,
    });
    const conversation: ChatMessage[] = [
      { role: "user", content: "ab" },
      { role: "assistant", content: first.output_text },
      { role: "user", content: "cd" },
    ];
    expect(second.previous_response_id).toBe(first.id);
    expect(second.usage!.input_tokens).toBe(
      tokenizer.applyChatTemplate(conversation, { addGenerationPrompt: true }).length,
    );
    expect(second.output_text).toBe(await chatAnswer(conversation, 4));
    expect(await (await fetch(`${base}/v1/responses/${first.id}`, { method: "DELETE" })).json()).toEqual({
      id: first.id,
      object: "response.deleted",
      deleted: true,
    });
    const gone = await apiError(openai.responses.retrieve(first.id));
    expect([gone.status, gone.code]).toEqual([404, "not_found"]);
    const again = await apiError(
      openai.responses.create({ model: "tiny", previous_response_id: first.id, input: "x", max_output_tokens: 2 }),
    );
    expect([again.status, again.code, again.param]).toEqual([
      404,
      "previous_response_not_found",
      "previous_response_id",
    ]);
    const unstored = await openai.responses.create({ model: "tiny", input: "x", max_output_tokens: 2, store: false });
    expect((await apiError(openai.responses.retrieve(unstored.id))).status).toBe(404);
  });

  it("gives the sampled tokens' logprobs on request, whole and in the streamed deltas, as chat completions does", async () => {
    const chat = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "hey" }],
      max_tokens: 8,
      temperature: 0,
      logprobs: true,
      top_logprobs: 1,
    });
    const expected = chat.choices[0]!.logprobs!.content!;
    const request = {
      model: "tiny",
      input: "hey",
      max_output_tokens: 8,
      temperature: 0,
      include: ["message.output_text.logprobs" as const],
      top_logprobs: 1,
    };
    const whole = await openai.responses.create(request);
    const part = (whole.output[0] as OpenAI.Responses.ResponseOutputMessage)
      .content[0] as OpenAI.Responses.ResponseOutputText;
    expect(part.logprobs).toEqual(expected);
    expect(part.logprobs).toHaveLength(whole.usage!.output_tokens);
    expect(whole.top_logprobs).toBe(1);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await openai.responses.create({ ...request, stream: true })) events.push(event);
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    expect(deltas.flatMap((d) => d.logprobs.map((l) => l.logprob))).toEqual(expected.map((l) => l.logprob));
    const done = events.find((e) => e.type === "response.output_text.done")!;
    expect(done.logprobs).toEqual(expected);
  });

  it("accepts the hints the OpenAI Agents SDK sends by default (text.verbosity, reasoning.effort, include [], strict tools)", async () => {
    // The request body @openai/agents 0.20.0 sends for an Agent with a function tool and no model settings (its model is "gpt-5.6-luna").
    const response = await openai.responses.create({
      model: "tiny",
      instructions: "be brief",
      input: [{ role: "user", content: "find a" }],
      include: [],
      tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} }, strict: true }],
      stream: false,
      text: { verbosity: "low" },
      reasoning: { effort: "none" },
      max_output_tokens: 2,
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(response).toMatchObject({
      model: "tiny",
      text: { format: { type: "text" }, verbosity: "low" },
      reasoning: { effort: "none", summary: null },
      tools: [{ type: "function", name: "lookup", strict: true, description: null }],
    });
  });

  it("refuses what it cannot honour with a 400 naming the parameter", async () => {
    const text = (input: string) => ({ model: "tiny", input, max_output_tokens: 2 });
    const cases: Array<[unknown, string, RegExp]> = [
      [
        { ...text("x"), tools: [{ type: "web_search" }] },
        "tools[0].type",
        /built-in tool `web_search` is not supported by nexrl serve/,
      ],
      [{ ...text("x"), background: true }, "background", /background mode is not supported/],
      [
        { model: "tiny", input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x/y.png" }] }] },
        "input[0].content[0].type",
        /content part of type `input_image` is not supported/,
      ],
      [
        { model: "tiny", input: [{ type: "web_search_call", id: "ws_1" }] },
        "input[0].type",
        /input item of type `web_search_call`/,
      ],
      [
        { ...text("x"), text: { format: { type: "json_schema", name: "s", schema: {} } } },
        "text.format.type",
        /text\.format other than text is not supported/,
      ],
      [{ ...text("x"), tool_choice: "required" }, "tool_choice", /cannot be forced to call a tool/],
      [{ ...text("x"), top_logprobs: 21 }, "top_logprobs", /top_logprobs/],
      [{ ...text("x"), include: ["file_search_call.results"] }, "include[0]", /include values other than/],
      [
        { ...text("x"), conversation: "conv_1" },
        "conversation",
        /400 conversation: not supported by nexrl serve; send previous_response_id/,
      ],
      [{ ...text("x"), temperature: 3 }, "temperature", /temperature/],
      [{ model: "tiny", input: [] }, "input", /give the input/],
      [{ input: "x" }, "model", /model/],
    ];
    for (const [body, param, message] of cases) {
      const error = await apiError(openai.responses.create(body as OpenAI.Responses.ResponseCreateParamsNonStreaming));
      expect([error.status, error.param, error.type]).toEqual([400, param, "invalid_request_error"]);
      expect(error.message).toMatch(message);
    }
    const put = await fetch(`${base}/v1/responses/resp_1`, { method: "PUT" });
    expect([put.status, put.headers.get("allow")]).toEqual([405, "GET, DELETE"]);
    const unknown = await apiError(openai.responses.create({ model: "nope", input: "x" }));
    expect([unknown.status, unknown.code]).toEqual([404, "model_not_found"]);
  });
});
