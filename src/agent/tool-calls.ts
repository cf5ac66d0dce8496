/**
 * Tool calls written as text, in the Hermes / Qwen format models are trained on:
 * `<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>`. The
 * gateway parses them out of generated text (a model that emits tokens has no other way to call
 * a tool) and writes them back into assistant messages for chat templates that do not render
 * `tool_calls` themselves.
 * @module
 */
import type { ToolCall } from "../types/tokenizer.js";

/** Text split into what the assistant said and the tool calls it made. */
export interface ParsedToolCalls {
  /** The text without the parsed `<tool_call>` blocks, trimmed; malformed blocks stay in it. */
  content: string;
  /** The calls, in order; `arguments` is a JSON text as in OpenAI's API. */
  toolCalls: ToolCall[];
}

const BLOCK = /<tool_call>([\s\S]*?)<\/tool_call>/g;

/** The call a block holds, or undefined when it is not `{"name": string, "arguments"?: object | JSON text}`. */
function parseBlock(body: string, id: string): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const { name, arguments: args = {} } = value as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string" || name === "") return undefined;
  let text: string;
  if (typeof args === "string") {
    try {
      JSON.parse(args);
    } catch {
      return undefined;
    }
    text = args;
  } else if (typeof args === "object" && args !== null && !Array.isArray(args)) {
    text = JSON.stringify(args);
  } else {
    return undefined;
  }
  return { id, type: "function", function: { name, arguments: text } };
}

/**
 * Parses every well-formed `<tool_call>…</tool_call>` block of `text`.
 * @param newId makes the id of each call found.
 */
export function parseToolCalls(text: string, newId: () => string): ParsedToolCalls {
  const toolCalls: ToolCall[] = [];
  const content = text.replace(BLOCK, (block, body: string) => {
    const call = parseBlock(body.trim(), newId());
    if (!call) return block;
    toolCalls.push(call);
    return "";
  });
  return { content: toolCalls.length > 0 ? content.trim() : text, toolCalls };
}

/** One call as a `<tool_call>` block, arguments written as JSON (compact). */
export function formatToolCall(call: ToolCall): string {
  let args: unknown = call.function.arguments;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    // Arguments that are not JSON are kept as the text the agent sent.
  }
  return `<tool_call>${JSON.stringify({ name: call.function.name, arguments: args })}</tool_call>`;
}

/** An assistant message's text with its tool calls written as `<tool_call>` blocks after it. */
export function contentWithToolCalls(content: string, toolCalls: readonly ToolCall[]): string {
  return [content, ...toolCalls.map(formatToolCall)].filter((part) => part !== "").join("\n");
}
