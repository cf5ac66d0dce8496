/**
 * gpt-oss's Harmony format (SGLang's `gpt-oss` parsers): a reply is a sequence of messages
 * `<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>BODY` ending in `<|end|>`,
 * `<|call|>` or `<|return|>`, the next one opened by `<|start|>assistant`. The `analysis` channel
 * is the reasoning, a message `to=functions.NAME` a tool call, `final` (and `commentary` without a
 * recipient, a preamble) the content.
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import { argumentsText, parseJson, plainReply, type ChatFormat, type ParsedReply, type ParseOptions } from "./types.js";

const START = "<|start|>";
const MESSAGE = "<|message|>";
const ENDS = /<\|(end|call|return)\|>/;

function parse(text: string, { newId }: ParseOptions): ParsedReply {
  if (!text.includes(MESSAGE)) return plainReply(text);
  const toolCalls: ToolCall[] = [];
  const reasoning: string[] = [];
  const content: string[] = [];
  let malformed = 0;
  for (const piece of text.split(START)) {
    if (piece.trim() === "") continue;
    const at = piece.indexOf(MESSAGE);
    if (at < 0) {
      malformed++;
      content.push(piece);
      continue;
    }
    const header = piece.slice(0, at);
    const rest = piece.slice(at + MESSAGE.length);
    const end = ENDS.exec(rest);
    const body = end ? rest.slice(0, end.index) : rest;
    const channel = /<\|channel\|>\s*(\w+)/.exec(header)?.[1];
    const recipient = /\bto=([^\s<]+)/.exec(header)?.[1];
    if (recipient !== undefined) {
      const name = recipient.startsWith("functions.") ? recipient.slice("functions.".length) : "";
      const args = name === "" ? undefined : argumentsText(parseJson(body.trim()));
      if (args === undefined) {
        malformed++;
        content.push(START + piece);
      } else toolCalls.push({ id: newId(), type: "function", function: { name, arguments: args } });
    } else if (channel === "analysis") reasoning.push(body.trim());
    else content.push(body.trim());
  }
  const thought = reasoning.filter((r) => r !== "").join("\n");
  return {
    content: content.filter((c) => c !== "").join("\n"),
    toolCalls,
    ...(thought !== "" && { reasoning: thought }),
    malformed,
  };
}

/** The messages of a reply: analysis (the reasoning), final (the content), then one commentary message per call. */
function write(content: string, toolCalls: readonly ToolCall[], reasoning?: string): string {
  const messages: string[] = [];
  if (reasoning !== undefined) messages.push(`<|channel|>analysis${MESSAGE}${reasoning}<|end|>`);
  if (content !== "" || toolCalls.length === 0) messages.push(`<|channel|>final${MESSAGE}${content}<|end|>`);
  for (const call of toolCalls)
    messages.push(
      `<|channel|>commentary to=functions.${call.function.name} <|constrain|>json${MESSAGE}${call.function.arguments}<|call|>`,
    );
  return messages.join(`${START}assistant`);
}

/** The Harmony format of gpt-oss. */
export const gptOss: ChatFormat = { family: "gpt_oss", parse, write, channels: true };
