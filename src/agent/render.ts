/**
 * Chat requests → prompt token ids. An assistant message the gateway answered, sent back
 * unchanged, is rendered as the very tokens the model sampled (spliced into the chat template's
 * output), so that a well-behaved agent's next prompt continues the previous prompt + completion
 * token for token, without decoding and re-encoding them. Tool calls are written into the text
 * for chat templates that do not render `tool_calls`.
 * @module
 */
import { randomBytes } from "node:crypto";
import type { ChatMessage, ChatTemplateOptions, Tokenizer, ToolCall } from "../types/tokenizer.js";
import { contentWithToolCalls } from "./tool-calls.js";
import { appendAll } from "../types/arrays.js";

/** An assistant message the gateway answered, with what the model generated for it. */
export interface AnsweredMessage {
  /** The content answered (stop string cut, tool calls removed). */
  content: string;
  /** The tool calls answered. */
  toolCalls: readonly ToolCall[];
  /** The decoded completion. */
  generated: string;
  /** The sampled token ids. */
  tokens: readonly number[];
}

const rendersToolCallsCache = new WeakMap<Tokenizer, boolean>();

/** Whether `tokenizer`'s chat template writes an assistant message's `tool_calls` (probed once per tokenizer). */
export function templateRendersToolCalls(tokenizer: Tokenizer): boolean {
  let renders = rendersToolCallsCache.get(tokenizer);
  if (renders === undefined) {
    const call: ToolCall = { id: "call_probe", type: "function", function: { name: "probe", arguments: "{}" } };
    const plain: ChatMessage[] = [
      { role: "user", content: "x" },
      { role: "assistant", content: "" },
    ];
    const withCall: ChatMessage[] = [plain[0]!, { role: "assistant", content: "", tool_calls: [call] }];
    const a = tokenizer.applyChatTemplate(plain);
    const b = tokenizer.applyChatTemplate(withCall);
    renders = a.length !== b.length || a.some((t, i) => t !== b[i]);
    rendersToolCallsCache.set(tokenizer, renders);
  }
  return renders;
}

function sameCalls(a: readonly ToolCall[], b: readonly ToolCall[]): boolean {
  return (
    a.length === b.length &&
    a.every(
      (call, i) =>
        call.id === b[i]!.id &&
        call.function.name === b[i]!.function.name &&
        call.function.arguments === b[i]!.function.arguments,
    )
  );
}

/** The answered message `message` repeats unchanged (same content, same tool calls), if any. */
function answeredOf(message: ChatMessage, answered: readonly AnsweredMessage[]): AnsweredMessage | undefined {
  if (message.role !== "assistant") return undefined;
  const calls = message.tool_calls ?? [];
  return answered.find((a) => a.content === message.content && sameCalls(a.toolCalls, calls));
}

/** Writes an assistant message's tool calls into its text, in the model family's format. */
export type WriteToolCalls = (content: string, toolCalls: readonly ToolCall[]) => string;

/** `message` with its tool calls written into the text (by `write`) when the template ignores `tool_calls`. */
function withToolCallsInText(message: ChatMessage, rendersToolCalls: boolean, write: WriteToolCalls): ChatMessage {
  const calls = message.tool_calls ?? [];
  if (message.role !== "assistant" || calls.length === 0 || rendersToolCalls) return message;
  const { tool_calls: _written, ...rest } = message;
  return { ...rest, content: write(message.content, calls) };
}

/**
 * The conversation as text to render: answered messages become the generated text, other tool
 * calls are written into the text (by `write`, Hermes `<tool_call>` blocks by default) when the
 * template ignores `tool_calls`.
 */
export function messagesToRender(
  messages: readonly ChatMessage[],
  answered: readonly AnsweredMessage[],
  rendersToolCalls: boolean,
  write: WriteToolCalls = contentWithToolCalls,
): ChatMessage[] {
  return messages.map((message) => {
    const known = answeredOf(message, answered);
    if (!known) return withToolCallsInText(message, rendersToolCalls, write);
    const { tool_calls: _calls, ...rest } = message;
    return { ...rest, content: known.generated };
  });
}

function indexOf(haystack: readonly number[], needle: readonly number[], from: number): number {
  outer: for (let i = from; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** A marker made of letters only, which tokenizers split the same way in and out of context. */
function marker(nonce: string, k: number): string {
  return `Nexrl${nonce}Reply${String.fromCharCode(97 + (k % 26)).repeat(1 + Math.floor(k / 26))}End`;
}

/**
 * The prompt token ids of a chat request. Each answered assistant message is rendered as a marker
 * which is then replaced by the tokens the model sampled (without the end-of-turn token the
 * template writes after it, when the sample ended with it). When a marker cannot be found in the
 * template's output (a tokenizer that merges it with its neighbours), the conversation is
 * rendered from the generated text instead. Tool calls of other messages are written into the
 * text by `write` when the template ignores `tool_calls`.
 */
export function renderChat(
  tokenizer: Tokenizer,
  messages: readonly ChatMessage[],
  answered: readonly AnsweredMessage[],
  options: ChatTemplateOptions,
  write: WriteToolCalls = contentWithToolCalls,
): number[] {
  const rendersToolCalls = templateRendersToolCalls(tokenizer);
  const nonce = [...randomBytes(8)].map((b) => String.fromCharCode(97 + (b % 26))).join("");
  const spliced: AnsweredMessage[] = [];
  const marked = messages.map((message) => {
    const known = answeredOf(message, answered);
    if (!known) return withToolCallsInText(message, rendersToolCalls, write);
    const { tool_calls: _calls, ...rest } = message;
    spliced.push(known);
    return { ...rest, content: marker(nonce, spliced.length - 1) };
  });
  if (spliced.length === 0) return tokenizer.applyChatTemplate(marked, options);
  const rendered = tokenizer.applyChatTemplate(marked, options);
  const out: number[] = [];
  let at = 0;
  for (const [k, known] of spliced.entries()) {
    const ids = tokenizer.encode(marker(nonce, k));
    const found = indexOf(rendered, ids, at);
    if (found < 0)
      return tokenizer.applyChatTemplate(messagesToRender(messages, answered, rendersToolCalls, write), options);
    const next = rendered[found + ids.length];
    const tokens = known.tokens.at(-1) === next ? known.tokens.slice(0, -1) : known.tokens;
    appendAll(out, rendered.slice(at, found), tokens);
    at = found + ids.length;
  }
  appendAll(out, rendered.slice(at));
  return out;
}
