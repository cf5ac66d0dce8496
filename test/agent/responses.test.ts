import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { mergeCalls, type RolloutSession } from "../../src/agent/index.js";
import type { SamplerInferenceClient } from "../../src/inference/index.js";
import type { ChatMessage } from "../../src/wire/tokenizer.js";
import { gateway, memorisingInference, recording, tinyInference, tokenizer, TOOL_CALL_TEXT } from "../support/agent.js";

const client = (baseURL: string) => new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const TOOLS: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "f",
    description: "looks k up",
    parameters: { type: "object", properties: { k: { type: "string" } } },
    strict: false,
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

/** The episode's calls merge into one sequence with no prefix break: every prompt continued the last prompt and answer. */
function expectOneTrajectory(session: RolloutSession, turns: number) {
  const trace = session.finish();
  expect(trace.calls.map((c) => c.endpoint)).toEqual(Array.from({ length: turns }, () => "responses"));
  const merged = mergeCalls(trace.calls, tokenizer);
  expect(merged.breaks).toEqual([]);
  expect(merged.sequences).toHaveLength(1);
  const last = trace.calls.at(-1)!;
  expect(merged.sequences[0]!.tokens).toEqual([...last.promptTokens, ...last.completionTokens]);
  return trace;
}

describe("agent gateway: the Responses API", () => {
  it("runs a tool loop sent back as items: the model calls f, the client sends function_call_output, the model answers; one trajectory", async () => {
    const g = await gateway();
    const inference = recording(memorised);
    const session = g.openRollout(inference.client, { maxTokensPerCall: 80 });
    const openai = client(session.baseURL);
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "find a" }];
    const first = await openai.responses.create({ model: "tiny", input, tools: TOOLS, temperature: 0 });
    expect(inference.calls[0]!.prompt).toEqual(
      tokenizer.applyChatTemplate([{ role: "user", content: "find a" }], { addGenerationPrompt: true }),
    );
    expect(first.output).toEqual([
      {
        id: expect.stringMatching(/^fc_/),
        type: "function_call",
        call_id: expect.stringMatching(/^call_/),
        name: "f",
        arguments: '{"k":"a"}',
        status: "completed",
      },
    ]);
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]), {
      type: "function_call_output",
      call_id: call.call_id,
      output: "7",
    });
    const second = await openai.responses.create({ model: "tiny", input, tools: TOOLS, temperature: 0 });
    expect([second.output_text, second.status]).toEqual(["7", "completed"]);
    const trace = expectOneTrajectory(session, 2);
    expect(tokenizer.decode(trace.calls[0]!.completionTokens)).toBe(TOOL_CALL_TEXT);
    // The call id the client sent back is the recorded tool call's id: the conversation is the chat-completions one.
    expect(trace.calls[0]!.toolCalls.map((c) => c.id)).toEqual([call.call_id]);
    expect(trace.calls[1]!.messages).toEqual([
      { role: "user", content: "find a" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: call.call_id, type: "function", function: { name: "f", arguments: '{"k":"a"}' } }],
      },
      { role: "tool", content: "7", tool_call_id: call.call_id },
    ] satisfies ChatMessage[]);
  });

  it("runs the same loop with previous_response_id, streamed, and keeps it to one trajectory", async () => {
    const g = await gateway();
    const session = g.openRollout(memorised, { maxTokensPerCall: 80 });
    const openai = client(session.baseURL);
    const stream = await openai.responses.create({
      model: "tiny",
      input: "find a",
      tools: TOOLS,
      temperature: 0,
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const first = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(events[2]).toMatchObject({ item: { type: "function_call", arguments: "", status: "in_progress" } });
    expect(events[3]).toMatchObject({ item_id: call.id, delta: '{"k":"a"}' });
    const second = await openai.responses
      .stream({
        model: "tiny",
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: "7" }],
        tools: TOOLS,
        temperature: 0,
      })
      .finalResponse();
    expect(second.output_text).toBe("7");
    const trace = expectOneTrajectory(session, 2);
    expect(trace.calls[1]!.messages).toHaveLength(3);
  });

  it("resolves item_reference items to the rollout's stored output items", async () => {
    const g = await gateway();
    const session = g.openRollout(memorised, { maxTokensPerCall: 80 });
    const openai = client(session.baseURL);
    const first = await openai.responses.create({ model: "tiny", input: "find a", tools: TOOLS, temperature: 0 });
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const second = await openai.responses.create({
      model: "tiny",
      input: [
        { role: "user", content: "find a" },
        { type: "item_reference", id: call.id! },
        { type: "function_call_output", call_id: call.call_id, output: "7" },
      ],
      tools: TOOLS,
      temperature: 0,
    });
    expect(second.output_text).toBe("7");
    expectOneTrajectory(session, 2);
  });

  it("renders instructions as the system message, and text answers sent back (as items or by previous_response_id) as their sampled tokens", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client, { maxTokensPerCall: 6 });
    const openai = client(session.baseURL);
    const instructions = "be brief";
    const first = await openai.responses.create({ model: "tiny", instructions, input: "hi" });
    expect(inference.calls[0]!.prompt).toEqual(
      tokenizer.applyChatTemplate(
        [
          { role: "system", content: instructions },
          { role: "user", content: "hi" },
        ],
        { addGenerationPrompt: true },
      ),
    );
    const second = await openai.responses.create({
      model: "tiny",
      instructions,
      input: [
        { role: "user", content: "hi" },
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { role: "user", content: [{ type: "input_text", text: "more" }] },
      ],
    });
    await openai.responses.create({ model: "tiny", instructions, previous_response_id: second.id, input: "again" });
    // The untrained model writes arbitrary bytes; spliced in as sampled, each prompt still continues the last.
    const trace = expectOneTrajectory(session, 3);
    expect(trace.calls[2]!.messages!.map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "user",
      "assistant",
      "user",
    ]);
  });

  it("keeps stored responses to their rollout: another rollout's id is 404, GET and DELETE work within it", async () => {
    const g = await gateway();
    const inference = await tinyInference();
    const a = g.openRollout(inference, { maxTokensPerCall: 3 });
    const b = g.openRollout(inference, { maxTokensPerCall: 3 });
    const created = await client(a.baseURL).responses.create({ model: "tiny", input: "x", metadata: { k: "v" } });
    expect((await client(a.baseURL).responses.retrieve(created.id)).metadata).toEqual({ k: "v" });
    const other = await apiError(
      client(b.baseURL).responses.create({ model: "tiny", input: "y", previous_response_id: created.id }),
    );
    expect([other.status, other.code, other.param]).toEqual([
      404,
      "previous_response_not_found",
      "previous_response_id",
    ]);
    expect((await apiError(client(b.baseURL).responses.retrieve(created.id))).status).toBe(404);
    const reference = await apiError(
      client(b.baseURL).responses.create({
        model: "tiny",
        input: [{ type: "item_reference", id: created.output[0]!.id! }],
      }),
    );
    expect([reference.status, reference.code, reference.param]).toEqual([404, "item_not_found", "input[0].id"]);
    await client(a.baseURL).responses.delete(created.id);
    expect((await apiError(client(a.baseURL).responses.retrieve(created.id))).status).toBe(404);
    const missing = await apiError(client(`${g.url}/v1`).responses.create({ model: "tiny", input: "x" }));
    expect([missing.status, missing.code]).toEqual([400, "rollout_missing"]);
    const refused = await apiError(
      client(a.baseURL).responses.create({ model: "tiny", input: "x", tools: [{ type: "web_search" }] }),
    );
    expect([refused.status, refused.param]).toEqual([400, "tools[0].type"]);
    expect(a.finish().calls).toHaveLength(1);
    expect(b.finish().calls).toHaveLength(0);
  });
});
