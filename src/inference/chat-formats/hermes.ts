/**
 * The Hermes format of Qwen2.5 and Qwen3 (SGLang's `qwen25` and `hermes` parsers):
 * `<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>`, one block per call.
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import { argumentsText, argumentsValue, isObject, joinParts, parseJson, type ChatFormat } from "./types.js";
import { thinkBlock } from "./reasoning.js";
import { parseBlocks } from "./blocks.js";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

/** The call a block's JSON holds, or undefined when it is not `{"name": string, "arguments"?: object}`. */
function callOf(body: string): Omit<ToolCall, "id"> | undefined {
  const value = parseJson(body.trim());
  if (!isObject(value)) return undefined;
  const { name, arguments: args = {} } = value;
  if (typeof name !== "string" || name === "") return undefined;
  const text = argumentsText(args);
  return text === undefined ? undefined : { type: "function", function: { name, arguments: text } };
}

/** One call as a `<tool_call>` block, arguments written as compact JSON. */
export function hermesBlock(call: ToolCall): string {
  return `${OPEN}${JSON.stringify({ name: call.function.name, arguments: argumentsValue(call) })}${CLOSE}`;
}

/** The Hermes / Qwen2.5 / Qwen3 format. */
export const hermes: ChatFormat = {
  family: "hermes",
  parse: (text, { newId }) => parseBlocks(text, OPEN, CLOSE, callOf, newId),
  write: (content, toolCalls, reasoning) => thinkBlock(reasoning) + joinParts([content, ...toolCalls.map(hermesBlock)]),
};
