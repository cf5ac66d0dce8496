/**
 * Tool calls for chat templates that ignore an assistant message's `tool_calls`: such a message's
 * calls are written into its text instead, in the model family's format, so the prompt still
 * shows them. The agent gateway and the `sft` worker render conversations this way.
 * @module
 */
import type { ChatMessage, Tokenizer, ToolCall } from "../../wire/tokenizer.js";
import { hermes } from "./hermes.js";

/** Writes an assistant message's tool calls into its text, in the model family's format. */
export type WriteToolCalls = (content: string, toolCalls: readonly ToolCall[]) => string;

/** The Hermes / Qwen format's {@link WriteToolCalls}: `<tool_call>` blocks after the content. */
const writeHermesToolCalls: WriteToolCalls = (content, toolCalls) => hermes.write(content, toolCalls);

const rendersToolCallsCache = new WeakMap<Tokenizer, boolean>();

/** Whether `tokenizer`'s chat template writes an assistant message's `tool_calls` (probed once per tokenizer). */
export function templateRendersToolCalls(tokenizer: Tokenizer): boolean {
  let renders = rendersToolCallsCache.get(tokenizer);
  if (renders === undefined) {
    const call: ToolCall = { id: "call_probe", type: "function", function: { name: "probe", arguments: "{}" } };
    const plain: ChatMessage[] = [
      { role: "user", content: "x" },
      { role: "assistant", content: "" },
    ];
    const withCall: ChatMessage[] = [plain[0]!, { role: "assistant", content: "", tool_calls: [call] }];
    const a = tokenizer.applyChatTemplate(plain);
    const b = tokenizer.applyChatTemplate(withCall);
    renders = a.length !== b.length || a.some((t, i) => t !== b[i]);
    rendersToolCallsCache.set(tokenizer, renders);
  }
  return renders;
}

/**
 * `message` with its tool calls written into the text (by `write`, Hermes `<tool_call>` blocks by
 * default) when the template ignores `tool_calls`; any other message unchanged.
 */
export function withToolCallsInText(
  message: ChatMessage,
  rendersToolCalls: boolean,
  write: WriteToolCalls = writeHermesToolCalls,
): ChatMessage {
  const calls = message.tool_calls ?? [];
  if (message.role !== "assistant" || calls.length === 0 || rendersToolCalls) return message;
  const { tool_calls: _written, ...rest } = message;
  return { ...rest, content: write(message.content, calls) };
}
