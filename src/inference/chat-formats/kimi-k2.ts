/**
 * Kimi K2's tool-call section (SGLang's `kimi_k2` parser):
 * `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}<|tool_call_end|>…<|tool_calls_section_end|>`.
 * The model's own id (`functions.NAME:IDX`) is the call's id, as its chat template expects it back.
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import { argumentsText, joinParts, parseJson, plainReply, type ChatFormat, type ParsedReply } from "./types.js";
import { thinkBlock } from "./reasoning.js";

const SECTION_BEGIN = "<|tool_calls_section_begin|>";
const SECTION_END = "<|tool_calls_section_end|>";
const CALL = /<\|tool_call_begin\|>\s*([^<\s]+)\s*<\|tool_call_argument_begin\|>([\s\S]*?)<\|tool_call_end\|>/y;

function parse(text: string): ParsedReply {
  const begin = text.indexOf(SECTION_BEGIN);
  if (begin < 0) return plainReply(text);
  const end = text.indexOf(SECTION_END, begin);
  if (end < 0) return plainReply(text, 1);
  const section = text.slice(begin + SECTION_BEGIN.length, end);
  const toolCalls: ToolCall[] = [];
  let malformed = 0;
  const left: string[] = [];
  CALL.lastIndex = 0;
  for (let at = section.search(/\S|$/); at < section.length; at += section.slice(at).search(/\S|$/)) {
    CALL.lastIndex = at;
    const match = CALL.exec(section);
    if (!match) {
      malformed++;
      left.push(section.slice(at));
      break;
    }
    at = CALL.lastIndex;
    const id = match[1]!;
    const name = /^(?:functions\.)?(.+?)(?::\d+)?$/.exec(id)?.[1] ?? "";
    const args = argumentsText(parseJson(match[2]!.trim()));
    if (args === undefined || name === "") {
      malformed++;
      left.push(match[0]);
    } else toolCalls.push({ id, type: "function", function: { name, arguments: args } });
  }
  if (toolCalls.length === 0) return plainReply(text, malformed);
  const content = joinParts([text.slice(0, begin).trim(), ...left, text.slice(end + SECTION_END.length).trim()]);
  return { content, toolCalls, malformed };
}

/** A call's id as Kimi writes it: the call's own when it has that shape, else `functions.NAME:INDEX`. */
function kimiId(call: ToolCall, index: number): string {
  return /^functions\..+:\d+$/.test(call.id) ? call.id : `functions.${call.function.name}:${index}`;
}

function write(content: string, toolCalls: readonly ToolCall[], reasoning?: string): string {
  if (toolCalls.length === 0) return thinkBlock(reasoning) + content;
  const calls = toolCalls.map(
    (call, i) =>
      `<|tool_call_begin|>${kimiId(call, i)}<|tool_call_argument_begin|>${call.function.arguments}<|tool_call_end|>`,
  );
  return `${thinkBlock(reasoning)}${content}${SECTION_BEGIN}${calls.join("")}${SECTION_END}`;
}

/** Kimi K2's format. */
export const kimiK2: ChatFormat = { family: "kimi_k2", parse, write };
