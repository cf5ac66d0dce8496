/**
 * The JSON format of Llama 3.1–3.3 (SGLang's `llama3` parser): `{"name": "f", "parameters": {…}}`,
 * the whole reply or after a `<|python_tag|>`, several calls separated by `;`.
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

const PYTHON_TAG = "<|python_tag|>";

/** The call of one JSON value: `{"name", "parameters"}` (or `"arguments"`), optionally `"type": "function"`. */
function callOf(value: unknown, newId: () => string): ToolCall | undefined {
  if (!isObject(value)) return undefined;
  const { name, parameters, arguments: args, type = "function", ...rest } = value;
  if (typeof name !== "string" || name === "" || type !== "function" || Object.keys(rest).length > 0) return undefined;
  const text = argumentsText(parameters ?? args ?? {});
  return text === undefined ? undefined : { id: newId(), type: "function", function: { name, arguments: text } };
}

/** The calls `text` is made of (JSON objects separated by `;`), or undefined when it is anything else. */
function callsOf(text: string, newId: () => string): ToolCall[] | undefined {
  const calls: ToolCall[] = [];
  let at = 0;
  while (at < text.length) {
    while (/\s/.test(text[at] ?? "")) at++;
    if (text[at] !== "{") return undefined;
    const end = jsonEnd(text, at);
    if (end < 0) return undefined;
    const call = callOf(parseJson(text.slice(at, end)), newId);
    if (!call) return undefined;
    calls.push(call);
    at = end;
    while (/\s/.test(text[at] ?? "")) at++;
    if (text[at] === ";") at++;
    else if (at < text.length) return undefined;
    while (/\s/.test(text[at] ?? "")) at++;
  }
  return calls.length > 0 ? calls : undefined;
}

/** Whether text that opens with `{` looks like a call the model tried to write: a name and its parameters. */
function looksLikeCall(body: string): boolean {
  return /^\{\s*"(name|type)"\s*:/.test(body) && /"(parameters|arguments)"\s*:/.test(body);
}

function parse(text: string, { newId }: ParseOptions): ParsedReply {
  const tag = text.indexOf(PYTHON_TAG);
  if (tag >= 0) {
    const calls = callsOf(text.slice(tag + PYTHON_TAG.length), newId);
    return calls ? { content: text.slice(0, tag).trim(), toolCalls: calls, malformed: 0 } : plainReply(text, 1);
  }
  const body = text.trim();
  if (!body.startsWith("{")) return plainReply(text);
  const calls = callsOf(body, newId);
  if (calls) return { content: "", toolCalls: calls, malformed: 0 };
  return plainReply(text, looksLikeCall(body) ? 1 : 0);
}

/** The calls as JSON separated by `; `, after `<|python_tag|>` when the message also has text. */
function write(content: string, toolCalls: readonly ToolCall[]): string {
  if (toolCalls.length === 0) return content;
  const calls = toolCalls
    .map((call) => JSON.stringify({ name: call.function.name, parameters: argumentsValue(call) }))
    .join("; ");
  return content === "" ? calls : `${content}${PYTHON_TAG}${calls}`;
}

/** The Llama 3.1–3.3 JSON format. */
export const llama3: ChatFormat = { family: "llama3", parse, write };
