import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  templateRendersToolCalls,
  withToolCallsInText,
} from "../../../src/inference/chat-formats/tool-calls-in-text.js";
import { ByteTokenizer } from "../../../src/engine/index.js";
import { HfTokenizer } from "../../../src/inference/index.js";
import type { ChatMessage, ToolCall } from "../../../src/wire/tokenizer.js";
import { qwen3Folder } from "../../support/qwen.js";

let qwen: HfTokenizer;
let folder: Awaited<ReturnType<typeof qwen3Folder>>;
beforeAll(async () => {
  folder = await qwen3Folder();
  qwen = await HfTokenizer.fromFolder(folder.dir);
});
afterAll(() => folder.cleanup());

const calls: ToolCall[] = [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"k":"a"}' } }];
const asked: ChatMessage = { role: "assistant", content: "let me see", tool_calls: calls };

describe("tool calls in the text", () => {
  it("knows which templates render tool_calls: not the byte template, Qwen3's", () => {
    expect(templateRendersToolCalls(new ByteTokenizer())).toBe(false);
    expect(templateRendersToolCalls(qwen)).toBe(true);
  });

  it("writes an assistant message's calls as Hermes blocks when the template ignores tool_calls", () => {
    expect(withToolCallsInText(asked, false)).toEqual({
      role: "assistant",
      content: 'let me see\n<tool_call>{"name":"f","arguments":{"k":"a"}}</tool_call>',
    });
  });

  it("writes them with the given format instead", () => {
    const write = (content: string, toolCalls: readonly ToolCall[]): string =>
      `${content} [${toolCalls.map((call) => call.function.name).join(",")}]`;
    expect(withToolCallsInText(asked, false, write)).toEqual({ role: "assistant", content: "let me see [f]" });
  });

  it("leaves a message unchanged when the template renders tool_calls, it has none, or it is not the assistant's", () => {
    expect(withToolCallsInText(asked, true)).toBe(asked);
    const plain: ChatMessage = { role: "assistant", content: "done" };
    expect(withToolCallsInText(plain, false)).toBe(plain);
    const emptyCalls: ChatMessage = { role: "assistant", content: "done", tool_calls: [] };
    expect(withToolCallsInText(emptyCalls, false)).toBe(emptyCalls);
    const tool: ChatMessage = { role: "tool", content: "7", tool_call_id: "call_1" };
    expect(withToolCallsInText(tool, false)).toBe(tool);
  });
});
