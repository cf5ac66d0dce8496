import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { episodeTrajectories } from "../../src/agent/episode.js";
import type { SamplerInferenceClient } from "../../src/inference/index.js";
import { mergeCalls } from "../../src/agent/index.js";
import { createAgentWorkerClass } from "../../src/agent/worker-class.js";
import { workerSettings } from "../../src/recipe/settings.js";
import {
  fixture,
  gateway,
  memorisingInference,
  onCleanup,
  recording,
  tempDir,
  tinyInference,
  tokenizer,
  writeFiles,
  writeRecipe,
} from "../support/agent.js";

const client = (baseURL: string) => new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "f",
      parameters: { type: "object", properties: { k: { type: "string" }, n: { type: "integer" } } },
    },
  },
];

/**
 * What the memorising model writes (Qwen3-Coder's XML without the optional new lines, so that a
 * two-turn episode fits the tiny model's 128-token context): a call, a call after its thinking,
 * and a malformed call.
 */
const XML_CALL = "<tool_call><function=f><parameter=k>a</parameter></function></tool_call>";
const THOUGHT_CALL = "<think>t</think><tool_call><function=f><parameter=n>2</parameter></function></tool_call>";
const BROKEN_CALL = "<tool_call><function=f><parameter=k>b</tool_call>";

/** Memorised the two-turn episode of {@link XML_CALL}. */
let memorised: SamplerInferenceClient;
/** Memorised {@link THOUGHT_CALL} (asked `b`) and {@link BROKEN_CALL} (asked `c`). */
let thinking: SamplerInferenceClient;
beforeAll(async () => {
  [memorised, thinking] = await Promise.all([
    memorisingInference([
      [
        { role: "user", content: "a" },
        { role: "assistant", content: XML_CALL },
        { role: "tool", content: "7" },
        { role: "assistant", content: "7" },
      ],
    ]),
    memorisingInference(
      [
        [
          { role: "user", content: "b" },
          { role: "assistant", content: THOUGHT_CALL },
        ],
        [
          { role: "user", content: "c" },
          { role: "assistant", content: BROKEN_CALL },
        ],
      ],
      200,
    ),
  ]);
}, 60_000);

describe("agent gateway: each family's tool calls", () => {
  it("gives the agent a structured call from a Qwen3-Coder XML call, and continues token-exact", async () => {
    const g = await gateway();
    const session = g.openRollout(memorised, { toolParser: "qwen3_coder", maxTokensPerCall: 100 });
    const openai = client(session.baseURL);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "a" }];
    const first = await openai.chat.completions.create({ model: "tiny", messages, tools: TOOLS, temperature: 0 });
    const message = first.choices[0]!.message;
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    expect(message.content).toBeNull();
    expect(message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/), type: "function", function: { name: "f", arguments: '{"k":"a"}' } },
    ]);
    messages.push(message, { role: "tool", tool_call_id: message.tool_calls![0]!.id, content: "7" });
    const second = await openai.chat.completions.create({ model: "tiny", messages, tools: TOOLS, temperature: 0 });
    expect(second.choices[0]!.message.content).toBe("7");
    const trace = session.finish();
    const [a, b] = trace.calls;
    expect(tokenizer.decode(a!.completionTokens)).toBe(XML_CALL);
    expect(a!.reply).toEqual({ content: "", toolCalls: a!.toolCalls });
    const merged = mergeCalls(trace.calls, tokenizer);
    expect(merged.breaks).toEqual([]);
    expect(merged.sequences).toHaveLength(1);
    expect(merged.sequences[0]!.tokens).toEqual([...b!.promptTokens, ...b!.completionTokens]);
  });

  it("splits the reasoning off and types the values with the tool's schema, in answers and streams", async () => {
    const g = await gateway();
    const session = g.openRollout(thinking, { toolParser: "qwen3_coder", maxTokensPerCall: 100 });
    const openai = client(session.baseURL);
    const request = {
      model: "tiny",
      messages: [{ role: "user" as const, content: "b" }],
      tools: TOOLS,
      temperature: 0,
    };
    const answer = await openai.chat.completions.create(request);
    const message = answer.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect([message.content, message.reasoning_content]).toEqual([null, "t"]);
    expect(message.tool_calls!.map((c) => (c.type === "function" ? c.function : c))).toEqual([
      { name: "f", arguments: '{"n":2}' },
    ]);
    const deltas: Array<OpenAI.ChatCompletionChunk.Choice["delta"] & { reasoning_content?: string }> = [];
    for await (const chunk of await openai.chat.completions.create({ ...request, stream: true }))
      deltas.push(...chunk.choices.map((c) => c.delta));
    expect(deltas.map((d) => d.reasoning_content ?? "").join("")).toBe("t");
    expect(deltas.flatMap((d) => d.tool_calls ?? []).map((c) => c.function)).toEqual([
      { name: "f", arguments: '{"n":2}' },
    ]);
    const [call] = session.finish().calls;
    expect(call!.reply).toEqual({ content: "", toolCalls: call!.toolCalls, reasoning: "t" });
  });

  it("finds no call in the XML with the template's default (hermes): the choice of format is what makes the call", async () => {
    const g = await gateway();
    const session = g.openRollout(thinking, { maxTokensPerCall: 100 });
    const answer = await client(session.baseURL).chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "b" }],
      tools: TOOLS,
      temperature: 0,
    });
    const message = answer.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect([message.tool_calls, message.reasoning_content, answer.choices[0]!.finish_reason]).toEqual([
      undefined,
      "t",
      "stop",
    ]);
    // The Hermes parser reads a <tool_call> block that is not JSON: a malformed call, kept as text.
    expect(message.content).toBe(THOUGHT_CALL.slice(THOUGHT_CALL.indexOf("<tool_call>")));
    expect(session.finish().calls[0]!.malformedToolCalls).toBe(1);
  });

  it("answers a malformed call as text and counts it in agent/malformed_tool_calls", async () => {
    const g = await gateway();
    const session = g.openRollout(thinking, { toolParser: "qwen3_coder", maxTokensPerCall: 100 });
    const answer = await client(session.baseURL).chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "c" }],
      tools: TOOLS,
      temperature: 0,
    });
    expect([answer.choices[0]!.message.content, answer.choices[0]!.message.tool_calls]).toEqual([
      BROKEN_CALL,
      undefined,
    ]);
    const trace = session.finish();
    const merged = mergeCalls(trace.calls, tokenizer);
    const [first] = episodeTrajectories(
      trace,
      merged.sequences,
      merged.breaks,
      { reward: 0, finalAnswer: "", truncated: false, metrics: {} },
      { weight: "one" },
    );
    expect(first!.counters).toMatchObject({ "agent/tool_calls": 0, "agent/malformed_tool_calls": 1 });
  });

  it("writes the calls of messages it did not sample into the prompt in the family's format", async () => {
    const g = await gateway();
    const inference = recording(await tinyInference());
    const session = g.openRollout(inference.client, { toolParser: "llama3", maxTokensPerCall: 2 });
    const call = { id: "call_z", type: "function" as const, function: { name: "f", arguments: '{"k":"z"}' } };
    await client(session.baseURL).chat.completions.create({
      model: "tiny",
      messages: [
        { role: "user", content: "z?" },
        { role: "assistant", content: "Looking.", tool_calls: [call] },
        { role: "tool", tool_call_id: "call_z", content: "26" },
      ],
      tools: TOOLS,
    });
    // The byte tokenizer's template ignores tool_calls: the call is written as Llama 3.1 writes it.
    expect(tokenizer.decode(inference.calls[0]!.result.promptTokens)).toBe(
      '<|user|>\nz?<|assistant|>\nLooking.<|python_tag|>{"name":"f","parameters":{"k":"z"}}<|tool|>\n26<|assistant|>\n',
    );
  });

  it("refuses, when the workers start, a reasoning parser that cannot read the template's format", async () => {
    const dir = await tempDir();
    await writeFiles(dir, { "train.jsonl": '{"prompt": "hi"}\n' });
    const recipe = await writeRecipe(
      dir,
      [
        "data: {data_files: [train.jsonl], rollout_repeat_n: 2}",
        `rollout_worker: {type: agent, agent_module_path: "${fixture("openai-agent.ts")}"}`,
        "trainer: {type: remote_api_grpo, total_train_steps: 1}",
        "service: {train_service: {backend: local, model: tiny}, inference_service: {reasoning_parser: gpt-oss}}",
        "",
      ].join("\n"),
    );
    const stop = new AbortController();
    onCleanup(async () => stop.abort());
    const workerClass = await createAgentWorkerClass(recipe.config, { recipeDir: dir }, stop.signal);
    expect(() => new workerClass({ name: "agent-0", settings: workerSettings(recipe.config), tokenizer })).toThrow(
      "service.inference_service.reasoning_parser: reasoning parser `gpt-oss` reads Harmony's analysis channel, but the hermes format has none",
    );
  });

  it("refuses an unknown tool parser when the rollout opens", async () => {
    const g = await gateway();
    expect(() => g.openRollout(memorised, { toolParser: "xml" })).toThrow("unknown tool parser `xml`");
  });
});
