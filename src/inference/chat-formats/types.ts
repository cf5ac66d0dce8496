/**
 * What every chat format (one per model family) does: read the tool calls (and, for Harmony,
 * the reasoning) out of sampled text, and write an assistant message's tool calls back into text
 * the way that family's models write them.
 * @module
 */
import type { ToolCall, ToolDefinition } from "../../wire/tokenizer.js";

/** The model families whose tool-call formats nexrl reads and writes. */
export const CHAT_FAMILIES = [
  "hermes",
  "qwen3_coder",
  "llama3",
  "deepseek_v3",
  "deepseek_v31",
  "gpt_oss",
  "mistral",
  "kimi_k2",
] as const;

/** A model family's id (`hermes` for Qwen2.5/Qwen3, `qwen3_coder`, `llama3`, …). */
export type ChatFamily = (typeof CHAT_FAMILIES)[number];

/** A reply split into what the assistant said, the tools it called and what it reasoned. */
export interface ParsedReply {
  /** The text the assistant said, without the calls parsed out of it; malformed calls stay in it as text. */
  content: string;
  /** The calls, in order; `arguments` is a JSON text as in OpenAI's API. */
  toolCalls: ToolCall[];
  /** The reasoning split out of the text (`<think>…</think>`, Harmony's analysis channel), when there was any. */
  reasoning?: string;
  /** How many calls were malformed (bad JSON, unknown structure, unclosed block) and left in the content. */
  malformed: number;
}

/** What a parse needs besides the text. */
export interface ParseOptions {
  /** Makes the id of each call found (families whose models write ids keep theirs). */
  newId: () => string;
  /** The request's tools: their JSON schemas type the string values of XML calls. */
  tools?: readonly ToolDefinition[];
}

/** One model family's tool-call format. */
export interface ChatFormat {
  /** The family's id. */
  readonly family: ChatFamily;
  /**
   * Parses the tool calls out of `text` (its reasoning already split off, except for formats
   * with {@link ChatFormat.channels}). Text without calls comes back unchanged.
   */
  parse(text: string, options: ParseOptions): ParsedReply;
  /**
   * An assistant message as the family's models write it: `reasoning` (as `<think>…</think>`, or
   * Harmony's analysis channel; families whose models do not reason, `llama3` and `mistral`,
   * write none), `content`, then the calls.
   */
  write(content: string, toolCalls: readonly ToolCall[], reasoning?: string): string;
  /** True when the format itself carries the reasoning (Harmony's analysis channel), so `<think>` tags are not read. */
  readonly channels?: boolean;
}

/** The reply of a text that holds no call: the text itself. */
export function plainReply(text: string, malformed = 0): ParsedReply {
  return { content: text, toolCalls: [], malformed };
}

/**
 * A call's `arguments` as OpenAI's JSON text: an object is written as JSON, a string is kept when
 * it is a JSON object's text; anything else (an array, a number, text that is not JSON) is malformed.
 */
export function argumentsText(value: unknown): string | undefined {
  if (typeof value === "string") {
    try {
      return isObject(JSON.parse(value)) ? value : undefined;
    } catch {
      return undefined;
    }
  }
  return isObject(value) ? JSON.stringify(value) : undefined;
}

/** Whether `value` is a plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `text` parsed as JSON, or undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A call's arguments as a value to write into text: the JSON they hold, or their text when they are not JSON. */
export function argumentsValue(call: ToolCall): unknown {
  return parseJson(call.function.arguments) ?? call.function.arguments;
}

/** `parts` that are not empty, joined with new lines. */
export function joinParts(parts: readonly string[]): string {
  return parts.filter((part) => part !== "").join("\n");
}

/**
 * Where the JSON object or array that starts at `start` ends (the index after its closing
 * bracket), matching brackets outside strings; -1 when it does not close.
 */
export function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}
