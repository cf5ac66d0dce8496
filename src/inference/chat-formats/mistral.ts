/**
 * Mistral's `[TOOL_CALLS]` formats (SGLang's `mistral` parser): a JSON list
 * `[TOOL_CALLS][{"name": "f", "arguments": {…}}, …]` (Mistral 7B v0.3, Nemo, Small 3.1), and the
 * newer `[TOOL_CALLS]NAME[ARGS]{…}` per call (Small 3.2, Devstral, Magistral; with an optional
 * `[CALL_ID]ID` before `[ARGS]`, and `[ARGS]` left out as text decoded without special tokens has it).
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import {
  argumentsText,
  argumentsValue,
  isObject,
  jsonEnd,
  parseJson,
  plainReply,
  type ChatFormat,
  type ParsedReply,
  type ParseOptions,
} from "./types.js";

const TOOL_CALLS = "[TOOL_CALLS]";

/** The call of one `{"name", "arguments", "id"?}` entry of the JSON list (the model's id kept), or undefined. */
function listedCall(value: unknown, newId: () => string): ToolCall | undefined {
  if (!isObject(value) || typeof value["name"] !== "string" || value["name"] === "") return undefined;
  const args = argumentsText(value["arguments"] ?? {});
  const id = typeof value["id"] === "string" && value["id"] !== "" ? value["id"] : newId();
  return args === undefined ? undefined : { id, type: "function", function: { name: value["name"], arguments: args } };
}

/** The calls written after `[TOOL_CALLS]` markers, or undefined when anything there is malformed. */
function callsOf(after: string, newId: () => string): ToolCall[] | undefined {
  const body = after.trimStart();
  if (body.startsWith("[")) {
    const end = jsonEnd(body, 0);
    const list = end < 0 || body.slice(end).trim() !== "" ? undefined : parseJson(body.slice(0, end));
    if (!Array.isArray(list) || list.length === 0) return undefined;
    const calls = list.map((entry) => listedCall(entry, newId));
    return calls.every((c) => c !== undefined) ? calls : undefined;
  }
  const calls: ToolCall[] = [];
  for (const one of after.split(TOOL_CALLS)) {
    // `[ARGS]` is a special token: text decoded without special tokens has the arguments right after the name.
    const match = /^\s*([^[\s{]+)\s*(?:\[CALL_ID\]\s*([^[\s]+)\s*)?(?:\[ARGS\])?(?=\s*\{)/.exec(one);
    if (!match) return undefined;
    const json = one.slice(match[0].length).trim();
    const args = argumentsText(parseJson(json));
    if (args === undefined) return undefined;
    calls.push({ id: match[2] ?? newId(), type: "function", function: { name: match[1]!, arguments: args } });
  }
  return calls;
}

function parse(text: string, { newId }: ParseOptions): ParsedReply {
  const at = text.indexOf(TOOL_CALLS);
  if (at < 0) return plainReply(text);
  const calls = callsOf(text.slice(at + TOOL_CALLS.length), newId);
  return calls ? { content: text.slice(0, at).trim(), toolCalls: calls, malformed: 0 } : plainReply(text, 1);
}

/** The calls as the JSON list after `[TOOL_CALLS]`. */
function write(content: string, toolCalls: readonly ToolCall[]): string {
  if (toolCalls.length === 0) return content;
  const list = toolCalls.map((call) => ({ name: call.function.name, arguments: argumentsValue(call) }));
  return `${content}${TOOL_CALLS}${JSON.stringify(list)}`;
}

/** Mistral's `[TOOL_CALLS]` formats; calls are written back as the JSON list. */
export const mistral: ChatFormat = { family: "mistral", parse, write };
