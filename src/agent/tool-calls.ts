/**
 * Tool calls written as text in the Hermes / Qwen format:
 * `<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>`. The
 * gateway reads every model family's format (`inference/chat-formats`); these are the
 * Hermes format's functions, kept under their first names.
 * @module
 */
import type { ToolCall } from "../wire/tokenizer.js";
import { hermes, hermesBlock } from "../inference/chat-formats/hermes.js";

/** Text split into what the assistant said and the tool calls it made. */
export interface ParsedToolCalls {
  /** The text without the parsed `<tool_call>` blocks, trimmed; malformed blocks stay in it. */
  content: string;
  /** The calls, in order; `arguments` is a JSON text as in OpenAI's API. */
  toolCalls: ToolCall[];
}

/**
 * Parses every well-formed `<tool_call>…</tool_call>` block of `text`.
 * @param newId makes the id of each call found.
 */
export function parseToolCalls(text: string, newId: () => string): ParsedToolCalls {
  const { content, toolCalls } = hermes.parse(text, { newId });
  return { content, toolCalls };
}

/** One call as a `<tool_call>` block, arguments written as JSON (compact). */
export function formatToolCall(call: ToolCall): string {
  return hermesBlock(call);
}

/** An assistant message's text with its tool calls written as `<tool_call>` blocks after it. */
export function contentWithToolCalls(content: string, toolCalls: readonly ToolCall[]): string {
  return hermes.write(content, toolCalls);
}
