import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  episodeTrajectories,
  formatToolCall,
  mergeCalls,
  parseToolCalls,
  type GatewayCall,
} from "../../src/agent/index.js";
import { contentWithToolCalls } from "../../src/agent/tool-calls.js";
import { messagesToRender, renderChat } from "../../src/agent/render.js";
import { HfTokenizer } from "../../src/inference/index.js";
import type { ChatMessage, ToolCall } from "../../src/wire/tokenizer.js";
import { qwen3Folder } from "../support/qwen.js";
import { tokenizer } from "../support/agent.js";

let qwen: HfTokenizer;
let folder: Awaited<ReturnType<typeof qwen3Folder>>;
beforeAll(async () => {
  folder = await qwen3Folder();
  qwen = await HfTokenizer.fromFolder(folder.dir);
});
afterAll(() => folder.cleanup());

/** A recorded call with made-up logprobs (-(i+1)/10 for the i-th sampled token). */
function call(
  turn: number,
  promptTokens: number[],
  completionTokens: number[],
  extra: Partial<GatewayCall> = {},
): GatewayCall {
  return {
    turn,
    endpoint: "chat.completions",
    promptTokens,
    completionTokens,
    logprobs: completionTokens.map((_, i) => -(i + 1) / 10),
    finishReason: "stop",
    text: "",
    toolCalls: [],
    reply: { content: "", toolCalls: [] },
    startedAt: 0,
    durationMs: 1,
    ...extra,
  };
}

let ids = 0;
const newId = () => `call_${ids++}`;

describe("tool calls in text", () => {
  it("parses well-formed <tool_call> blocks, keeps malformed ones in the content", () => {
    expect(
      parseToolCalls('sure <tool_call>{"name": "calc", "arguments": {"e": "2+3"}}</tool_call>', () => "call_x"),
    ).toEqual({
      content: "sure",
      toolCalls: [{ id: "call_x", type: "function", function: { name: "calc", arguments: '{"e":"2+3"}' } }],
    });
    const two = parseToolCalls(
      '<tool_call>\n{"name":"a","arguments":"{\\"x\\":1}"}\n</tool_call><tool_call>{"name":"b"}</tool_call>',
      newId,
    );
    expect(two.toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([
      ["a", '{"x":1}'],
      ["b", "{}"],
    ]);
    expect(two.content).toBe("");
    const malformed =
      'x <tool_call>{"name": 3}</tool_call> <tool_call>not json</tool_call> <tool_call>{"name":"c","arguments":[1]}</tool_call>';
    expect(parseToolCalls(malformed, newId)).toEqual({ content: malformed, toolCalls: [] });
    expect(parseToolCalls('<tool_call>{"name":"a"}', newId).toolCalls).toEqual([]);
  });

  it("writes calls back as blocks after the content", () => {
    const calls: ToolCall[] = [
      { id: "1", type: "function", function: { name: "f", arguments: '{"k": "a"}' } },
      { id: "2", type: "function", function: { name: "g", arguments: "not json" } },
    ];
    expect(formatToolCall(calls[0]!)).toBe('<tool_call>{"name":"f","arguments":{"k":"a"}}</tool_call>');
    expect(contentWithToolCalls("ok", calls)).toBe(
      'ok\n<tool_call>{"name":"f","arguments":{"k":"a"}}</tool_call>\n<tool_call>{"name":"g","arguments":"not json"}</tool_call>',
    );
    expect(contentWithToolCalls("", calls.slice(0, 1))).toBe(formatToolCall(calls[0]!));
  });
});

describe("rendering chat requests", () => {
  const calls: ToolCall[] = [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"k":"a"}' } }];

  it("renders an answered assistant message as the generated text, and writes other tool calls into the text when the template ignores them", () => {
    const generated = ' <tool_call>{"name": "f", "arguments": {"k": "a"}}</tool_call>';
    const answered = [{ content: "", toolCalls: calls, generated, tokens: tokenizer.encode(generated) }];
    const messages: ChatMessage[] = [
      { role: "user", content: "q" },
      { role: "assistant", content: "", tool_calls: calls },
      { role: "tool", content: "7", tool_call_id: "call_1" },
    ];
    expect(messagesToRender(messages, answered, false)).toEqual([
      messages[0],
      { role: "assistant", content: answered[0]!.generated },
      messages[2],
    ]);
    const edited: ChatMessage[] = [
      messages[0]!,
      {
        role: "assistant",
        content: "",
        tool_calls: [{ ...calls[0]!, function: { name: "f", arguments: '{"k":"b"}' } }],
      },
    ];
    expect(messagesToRender(edited, answered, false)[1]).toEqual({
      role: "assistant",
      content: '<tool_call>{"name":"f","arguments":{"k":"b"}}</tool_call>',
    });
    expect(messagesToRender(edited, answered, true)[1]).toEqual(edited[1]);
  });
});

describe("replaying answers as sampled tokens", () => {
  it("splices the sampled bytes back even when they are not valid UTF-8 (text would not round-trip)", () => {
    const user: ChatMessage = { role: "user", content: "hi" };
    const first = tokenizer.applyChatTemplate([user], { addGenerationPrompt: true });
    const sampled = [0x61, 0xc3, 0x28, 0xff, tokenizer.eosId];
    const content = tokenizer.decode(sampled);
    expect(tokenizer.encode(content)).not.toEqual(sampled.slice(0, -1));
    const answered = [{ content, toolCalls: [], generated: content, tokens: sampled }];
    const next = renderChat(
      tokenizer,
      [user, { role: "assistant", content }, { role: "user", content: "more" }],
      answered,
      { addGenerationPrompt: true },
    );
    expect(next.slice(0, first.length + sampled.length)).toEqual([...first, ...sampled]);
    expect(tokenizer.decode(next.slice(first.length + sampled.length))).toBe("<|user|>\nmore<|assistant|>\n");
    const cut = [0x61, 0x62];
    const lengthCut = renderChat(
      tokenizer,
      [user, { role: "assistant", content: "ab" }],
      [{ content: "ab", toolCalls: [], generated: "ab", tokens: cut }],
      {},
    );
    expect(lengthCut).toEqual([...first, ...cut, tokenizer.eosId]);
  });

  it("keeps a BPE model's own token split, and renders edited answers through the template", () => {
    const user: ChatMessage = { role: "user", content: "say hello" };
    const first = qwen.applyChatTemplate([user], { addGenerationPrompt: true });
    const pieces = [...qwen.encode("hel"), ...qwen.encode("lo"), qwen.eosId];
    expect(pieces.slice(0, -1)).not.toEqual(qwen.encode("hello"));
    const answered = [{ content: "hello", toolCalls: [], generated: "hello", tokens: pieces }];
    const options = { addGenerationPrompt: true };
    const next = renderChat(
      qwen,
      [user, { role: "assistant", content: "hello" }, { role: "user", content: "again" }],
      answered,
      options,
    );
    expect(next.slice(0, first.length)).toEqual(first);
    expect(next.slice(first.length, first.length + pieces.length)).toEqual(pieces);
    const edited = renderChat(
      qwen,
      [user, { role: "assistant", content: "hello!" }, { role: "user", content: "again" }],
      answered,
      options,
    );
    expect(edited).toEqual(
      qwen.applyChatTemplate(
        [user, { role: "assistant", content: "hello!" }, { role: "user", content: "again" }],
        options,
      ),
    );
  });
});

describe("merging a trace", () => {
  it("merges continuous calls into one sequence: loss and logprobs on sampled tokens only", () => {
    const a = call(1, [1, 2, 3], [4, 5]);
    const b = call(2, [1, 2, 3, 4, 5, 6, 7], [8]);
    const c = call(3, [1, 2, 3, 4, 5, 6, 7, 8], [9, 10], { policyVersion: 2 });
    const { sequences, breaks } = mergeCalls([a, b, c], tokenizer);
    expect(breaks).toEqual([]);
    expect(sequences).toEqual([
      {
        tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        lossMask: [0, 0, 0, 1, 1, 0, 0, 1, 1, 1],
        logprobs: [0, 0, 0, -0.1, -0.2, 0, 0, -0.1, -0.1, -0.2],
        turns: [1, 2, 3],
        policyVersion: 2,
      },
    ]);
  });

  it("makes a sequence of each call with merge: false (rollout_worker.enable_trace_prefix_merge: false)", () => {
    const a = call(1, [1, 2, 3], [4, 5]);
    const b = call(2, [1, 2, 3, 4, 5, 6, 7], [8], { policyVersion: 1 });
    const { sequences, breaks } = mergeCalls([a, b], tokenizer, { merge: false });
    expect(breaks).toEqual([]);
    expect(sequences).toEqual([
      { tokens: [1, 2, 3, 4, 5], lossMask: [0, 0, 0, 1, 1], logprobs: [0, 0, 0, -0.1, -0.2], turns: [1] },
      {
        tokens: [1, 2, 3, 4, 5, 6, 7, 8],
        lossMask: [0, 0, 0, 0, 0, 0, 0, 1],
        logprobs: [0, 0, 0, 0, 0, 0, 0, -0.1],
        turns: [2],
        policyVersion: 1,
      },
    ]);
    expect(mergeCalls([a, b], tokenizer).sequences.map((s) => s.turns)).toEqual([[1, 2]]);
  });

  it("starts a new sequence where continuity breaks and explains where and how", () => {
    const system = tokenizer.applyChatTemplate([{ role: "user", content: "what is 2+2?" }], {
      addGenerationPrompt: true,
    });
    const reply = [...tokenizer.encode("4"), tokenizer.eosId];
    const a = call(1, system, reply);
    const drifted = tokenizer.applyChatTemplate(
      [
        { role: "user", content: "what is 3+3?" },
        { role: "assistant", content: "4" },
        { role: "user", content: "sure?" },
      ],
      { addGenerationPrompt: true },
    );
    const b = call(2, drifted, [...tokenizer.encode("6"), tokenizer.eosId]);
    const c = call(3, [...drifted, ...b.completionTokens], [tokenizer.eosId]);
    const shorter = call(4, drifted.slice(0, 5), [tokenizer.eosId]);
    const { sequences, breaks } = mergeCalls([a, b, c, shorter], tokenizer);
    expect(sequences.map((s) => s.turns)).toEqual([[1], [2, 3], [4]]);
    const at = "\u0100<|user|>\nwhat is ".length;
    expect(breaks[0]).toEqual({
      turn: 2,
      previousTurn: 1,
      firstDifferingIndex: at,
      expectedToken: "2".charCodeAt(0),
      actualToken: "3".charCodeAt(0),
      context: "<|user|>\nwhat is ",
      expected: "2+2?<|assistant|>\n4",
      actual: "3+3?<|assistant|>\n4<|user|>\nsure?<|assistant|", // 48 tokens from the difference on
    });
    expect(breaks[1]).toMatchObject({
      turn: 4,
      previousTurn: 3,
      firstDifferingIndex: 5,
      actualToken: null,
      actual: "",
    });
  });

  it("shows where a chat template breaks the prefix when answers are replayed as text: Qwen3 drops earlier reasoning", () => {
    const user: ChatMessage = { role: "user", content: "2+2?" };
    const first = qwen.applyChatTemplate([user], { addGenerationPrompt: true });
    const generated = "<think>\nadd them\n</think>\n\n4";
    const completion = [...qwen.encode(generated), qwen.eosId];
    const answered = [{ content: generated, toolCalls: [], generated, tokens: completion }];
    const conversation: ChatMessage[] = [
      user,
      { role: "assistant", content: generated },
      { role: "user", content: "sure?" },
    ];
    const asText = qwen.applyChatTemplate(messagesToRender(conversation, answered, true), {
      addGenerationPrompt: true,
    });
    const { sequences, breaks } = mergeCalls([call(1, first, completion), call(2, asText, [qwen.eosId])], qwen);
    expect(sequences).toHaveLength(2);
    expect(breaks).toHaveLength(1);
    expect(breaks[0]!.expected.startsWith("<think>\nadd them")).toBe(true);
    expect(breaks[0]!.actual.includes("add them")).toBe(false);
    const asTokens = renderChat(qwen, conversation, answered, { addGenerationPrompt: true });
    expect(mergeCalls([call(1, first, completion), call(2, asTokens, [qwen.eosId])], qwen).breaks).toEqual([]);
  });
});

describe("episode trajectories", () => {
  it("share the reward, split the loss weight, count once per episode and carry the break explanation", () => {
    const a = call(1, [1, 2], [3]);
    const b = call(2, [9, 9], [4], {
      toolCalls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
    });
    const trace = { rolloutId: "r-x", calls: [a, b] };
    const { sequences, breaks } = mergeCalls(trace.calls, tokenizer);
    const out = episodeTrajectories(
      trace,
      sequences,
      breaks,
      { reward: 0.5, finalAnswer: "42", truncated: false, metrics: { exact: 1 } },
      { weight: "inverse_count", taskName: "t" },
    );
    expect(out.map((t) => [t.tokens, t.lossMask, t.reward, t.lossWeight])).toEqual([
      [[1, 2, 3], [0, 0, 1], 0.5, 0.5],
      [[9, 9, 4], [0, 0, 1], 0.5, 0.5],
    ]);
    expect(out[0]).toMatchObject({
      score: { reward_score: 0.5, exact: 1 },
      counters: {
        "agent/episodes": 1,
        "agent/trajectories": 2,
        "agent/calls": 2,
        "agent/prefix_breaks": 1,
        "agent/tool_calls": 1,
        "agent/truncated_episodes": 0,
      },
      extraFields: {
        agent: { rollout_id: "r-x", trajectory: 0, trajectories: 2, turns: [1], truncated: false },
        response: "42",
        task_name: "t",
      },
    });
    expect(out[1]!.counters).toBeUndefined();
    expect(out[0]!.extraFields!.diagnostics).toBeUndefined();
    expect(out[1]!.extraFields!.diagnostics).toEqual([
      expect.objectContaining({
        kind: "prefix_break",
        turn: 2,
        previous_turn: 1,
        first_differing_index: 0,
        expected_token: 1,
        actual_token: 9,
      }),
    ]);
    expect(out[1]!.extraFields!.calls).toEqual([
      expect.objectContaining({ turn: 2, prompt_tokens: 2, completion_tokens: 1, tool_calls: ["f"] }),
    ]);
    const one = episodeTrajectories(
      trace,
      sequences,
      breaks,
      { reward: 1, finalAnswer: "", truncated: true, truncationReason: "timeout" },
      { weight: "one" },
    );
    expect(one.map((t) => t.lossWeight)).toEqual([1, 1]);
    expect(one[0]).toMatchObject({
      extraFields: { is_truncated: true, agent: { truncated: true, truncation_reason: "timeout" } },
      counters: { "agent/truncated_episodes": 1 },
    });
  });
});
