/**
 * Calls written as blocks between an opening and a closing tag (`<tool_call>…</tool_call>`), the
 * shape of the Hermes and Qwen3-Coder formats.
 * @module
 */
import type { ToolCall } from "../../wire/tokenizer.js";
import type { ParsedReply } from "./types.js";

/**
 * Parses every `open`…`close` block of `text` with `callOf` (which answers undefined for a body
 * that is not a call). A block ends at the first closing tag after which its body is a call, so
 * that an argument holding the closing tag in a string does not cut it short; a block that is
 * never a call, or never closed, is malformed and stays in the content as text.
 * @param newId the id of each call found.
 */
export function parseBlocks(
  text: string,
  open: string,
  close: string,
  callOf: (body: string) => Omit<ToolCall, "id"> | undefined,
  newId: () => string,
): ParsedReply {
  const toolCalls: ToolCall[] = [];
  let malformed = 0;
  let content = "";
  let at = 0;
  for (let start = text.indexOf(open); start >= 0; start = text.indexOf(open, at)) {
    const firstClose = text.indexOf(close, start + open.length);
    if (firstClose < 0) {
      malformed++;
      break;
    }
    let call: Omit<ToolCall, "id"> | undefined;
    let end = firstClose;
    for (let c = firstClose; c >= 0 && !call; c = text.indexOf(close, c + close.length)) {
      call = callOf(text.slice(start + open.length, c));
      if (call) end = c;
    }
    if (call) {
      toolCalls.push({ id: newId(), ...call });
      content += text.slice(at, start);
    } else {
      malformed++;
      content += text.slice(at, end + close.length);
    }
    at = end + close.length;
  }
  content += text.slice(at);
  return { content: toolCalls.length > 0 ? content.trim() : text, toolCalls, malformed };
}
