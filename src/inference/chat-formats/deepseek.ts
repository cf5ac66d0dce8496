/**
 * DeepSeek's tool-call markers (SGLang's `deepseekv3` and `deepseekv31` parsers). V3 (and R1):
 * `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`;
 * V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`.
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import {
  argumentsText,
  joinParts,
  parseJson,
  plainReply,
  type ChatFormat,
  type ParsedReply,
  type ParseOptions,
} from "./types.js";
import { thinkBlock } from "./reasoning.js";

const SECTION_BEGIN = "<｜tool▁calls▁begin｜>";
const SECTION_END = "<｜tool▁calls▁end｜>";
const CALL_BEGIN = "<｜tool▁call▁begin｜>";
const CALL_END = "<｜tool▁call▁end｜>";
const SEP = "<｜tool▁sep｜>";

/** A call's name and arguments text out of the body between its markers, or undefined when malformed. */
type CallBody = (body: string) => { name: string; args: unknown } | undefined;

const v3Body: CallBody = (body) => {
  const match = /^function<｜tool▁sep｜>([^\n]+)\n```(?:json)?\n([\s\S]*)\n```$/.exec(body.trim());
  return match ? { name: match[1]!.trim(), args: parseJson(match[2]!) } : undefined;
};

const v31Body: CallBody = (body) => {
  const sep = body.indexOf(SEP);
  return sep < 0 ? undefined : { name: body.slice(0, sep).trim(), args: parseJson(body.slice(sep + SEP.length)) };
};

/**
 * Parses the tool-call section of `text`: each well-formed call out, each malformed one left in
 * the content as its text; a section that never closes is malformed as a whole.
 */
function parseSection(text: string, { newId }: ParseOptions, callBody: CallBody): ParsedReply {
  const begin = text.indexOf(SECTION_BEGIN);
  if (begin < 0) return plainReply(text);
  const end = text.indexOf(SECTION_END, begin);
  if (end < 0) return plainReply(text, 1);
  const section = text.slice(begin + SECTION_BEGIN.length, end);
  const toolCalls: ToolCall[] = [];
  const left: string[] = [];
  let malformed = 0;
  let at = 0;
  while (at < section.length) {
    const start = section.indexOf(CALL_BEGIN, at);
    const stop = start < 0 ? -1 : section.indexOf(CALL_END, start);
    if (start < 0 || stop < 0 || section.slice(at, start).trim() !== "") {
      malformed++;
      left.push(section.slice(at));
      break;
    }
    const body = callBody(section.slice(start + CALL_BEGIN.length, stop));
    const args = body && body.name !== "" ? argumentsText(body.args) : undefined;
    if (body && args !== undefined)
      toolCalls.push({ id: newId(), type: "function", function: { name: body.name, arguments: args } });
    else {
      malformed++;
      left.push(section.slice(start, stop + CALL_END.length));
    }
    at = stop + CALL_END.length;
    if (section.slice(at).trim() === "") break;
  }
  if (toolCalls.length === 0) return plainReply(text, malformed);
  const content = joinParts([text.slice(0, begin).trim(), ...left, text.slice(end + SECTION_END.length).trim()]);
  return { content, toolCalls, malformed };
}

function writer(callText: (call: ToolCall) => string): ChatFormat["write"] {
  return (content, toolCalls, reasoning) => {
    const think = thinkBlock(reasoning);
    if (toolCalls.length === 0) return think + content;
    return `${think}${content}${SECTION_BEGIN}${toolCalls.map((c) => `${CALL_BEGIN}${callText(c)}${CALL_END}`).join("\n")}${SECTION_END}`;
  };
}

/** DeepSeek V3 (and R1): typed calls with arguments in a JSON code block. */
export const deepseekV3: ChatFormat = {
  family: "deepseek_v3",
  parse: (text, options) => parseSection(text, options, v3Body),
  write: writer((call) => `function${SEP}${call.function.name}\n\`\`\`json\n${call.function.arguments}\n\`\`\``),
};

/** DeepSeek V3.1: the name, the separator, the arguments' JSON. */
export const deepseekV31: ChatFormat = {
  family: "deepseek_v31",
  parse: (text, options) => parseSection(text, options, v31Body),
  write: writer((call) => `${call.function.name}${SEP}${call.function.arguments}`),
};
