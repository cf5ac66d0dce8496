/**
 * Chat requests → prompt token ids. An assistant message the gateway answered, sent back
 * unchanged, is rendered as the very tokens the model sampled (spliced into the chat template's
 * output), so that a well-behaved agent's next prompt continues the previous prompt + completion
 * token for token, without decoding and re-encoding them. Tool calls are written into the text
 * for chat templates that do not render `tool_calls`.
 * @module
 */
import { randomBytes } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { ChatMessage, ChatTemplateOptions, Tokenizer, ToolCall } from "../wire/tokenizer.js";
import {
  templateRendersToolCalls,
  withToolCallsInText,
  type WriteToolCalls,
} from "../inference/chat-formats/tool-calls-in-text.js";
import { jsonArguments, type ToolArguments } from "../server/anthropic-protocol.js";
import { appendAll } from "../wire/arrays.js";
import { SAMPLED_COMPLETION } from "../inference/renderers/index.js";

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

/**
 * Writes a tool_use block sent back as the arguments the gateway answered for that call — the
 * very text the model wrote, whose key order and spacing `JSON.stringify(input)` need not repeat
 * — when its id and name are those of an answered call and its input is what they parse to;
 * otherwise as compact JSON. So an answered turn sent back as Anthropic blocks matches it.
 */
export function answeredArguments(answered: readonly AnsweredMessage[]): ToolArguments {
  return (use) => {
    for (const message of answered)
      for (const call of message.toolCalls)
        if (call.id === use.id && call.function.name === use.name && sameInput(call.function.arguments, use.input))
          return call.function.arguments;
    return jsonArguments(use);
  };
}

function sameInput(args: string, input: Record<string, unknown>): boolean {
  try {
    return isDeepStrictEqual(JSON.parse(args), input);
  } catch {
    return false;
  }
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
  write?: WriteToolCalls,
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

function endsWith(tokens: readonly number[], suffix: readonly number[]): boolean {
  return suffix.length <= tokens.length && suffix.every((t, i) => tokens[tokens.length - suffix.length + i] === t);
}

/** A generation prompt that the template writes differently in front of an earlier assistant message. */
interface HeaderRewrite {
  /** What the generation prompt ends with (the tokens the model sampled after). */
  generation: number[];
  /** What the template writes instead in front of an earlier assistant message. */
  written: number[];
}

const headerRewriteCache = new WeakMap<Tokenizer, Map<string, HeaderRewrite | null>>();

/**
 * Whether the template's generation prompt differs from the header it writes in front of an
 * earlier assistant message, as Qwen3's does with `enable_thinking: false` (the prompt ends with
 * an empty `<think>\n\n</think>\n\n` that history leaves out): then the sampled tokens must
 * follow the generation prompt, not the history header, or every later prompt breaks the prefix.
 * Probed once per tokenizer and template kwargs.
 */
function headerRewrite(tokenizer: Tokenizer, options: ChatTemplateOptions): HeaderRewrite | null {
  const key = JSON.stringify(options.chatTemplateKwargs ?? {});
  let byKwargs = headerRewriteCache.get(tokenizer);
  if (!byKwargs) headerRewriteCache.set(tokenizer, (byKwargs = new Map()));
  if (byKwargs.has(key)) return byKwargs.get(key)!;
  let rewrite: HeaderRewrite | null = null;
  try {
    const base = { ...(options.chatTemplateKwargs && { chatTemplateKwargs: options.chatTemplateKwargs }) };
    const user: ChatMessage = { role: "user", content: "x" };
    const closed = tokenizer.applyChatTemplate([user], base);
    const open = tokenizer.applyChatTemplate([user], { ...base, addGenerationPrompt: true });
    const probe = marker("probe", 0);
    const earlier = tokenizer.applyChatTemplate(
      [
        user,
        { role: "assistant", content: probe, [SAMPLED_COMPLETION]: [] } as ChatMessage,
        { role: "user", content: "y" },
      ],
      base,
    );
    const found = indexOf(earlier, tokenizer.encode(probe), 0);
    if (found >= closed.length && open.length > closed.length && closed.every((t, i) => open[i] === t)) {
      const generation = open.slice(closed.length);
      const written = earlier.slice(closed.length, found);
      const differs = written.length !== generation.length || written.some((t, i) => generation[i] !== t);
      if (differs && written.length > 0) rewrite = { generation, written };
    }
  } catch {
    // A template that cannot render the probe gets no rewrite.
  }
  byKwargs.set(key, rewrite);
  return rewrite;
}

/**
 * The prompt token ids of a chat request. Each answered assistant message is rendered as a marker
 * which is then replaced by the tokens the model sampled (without the end-of-turn token the
 * template writes after it, when the sample ended with it), behind the generation prompt they
 * were sampled after (see {@link headerRewrite}). When a marker cannot be found in the
 * template's output (a tokenizer that merges it with its neighbours), the conversation is
 * rendered from the generated text instead. Tool calls of other messages are written into the
 * text by `write` when the template ignores `tool_calls`.
 */
export function renderChat(
  tokenizer: Tokenizer,
  messages: readonly ChatMessage[],
  answered: readonly AnsweredMessage[],
  options: ChatTemplateOptions,
  write?: WriteToolCalls,
): number[] {
  const rendersToolCalls = templateRendersToolCalls(tokenizer);
  const nonce = [...randomBytes(8)].map((b) => String.fromCharCode(97 + (b % 26))).join("");
  const spliced: AnsweredMessage[] = [];
  const marked = messages.map((message) => {
    const known = answeredOf(message, answered);
    if (!known) return withToolCallsInText(message, rendersToolCalls, write);
    const { tool_calls: _calls, ...rest } = message;
    spliced.push(known);
    // Marked as a sampled completion (with its tool calls, which later tool results name):
    // nexrl's renderers (Harmony, Llama 3) then write the generation prompt and the marker only,
    // since the sampled tokens carry the model's own headers and end token; Jinja templates do
    // not see the mark.
    return { ...rest, content: marker(nonce, spliced.length - 1), [SAMPLED_COMPLETION]: known.toolCalls };
  });
  if (spliced.length === 0) return tokenizer.applyChatTemplate(marked, options);
  const rendered = tokenizer.applyChatTemplate(marked, options);
  const rewrite = headerRewrite(tokenizer, options);
  const out: number[] = [];
  let at = 0;
  for (const [k, known] of spliced.entries()) {
    const ids = tokenizer.encode(marker(nonce, k));
    const found = indexOf(rendered, ids, at);
    if (found < 0)
      return tokenizer.applyChatTemplate(messagesToRender(messages, answered, rendersToolCalls, write), options);
    const next = rendered[found + ids.length];
    const tokens = known.tokens.at(-1) === next ? known.tokens.slice(0, -1) : known.tokens;
    let before = rendered.slice(at, found);
    if (rewrite && !endsWith(before, rewrite.generation) && endsWith(before, rewrite.written)) {
      before = [...before.slice(0, before.length - rewrite.written.length), ...rewrite.generation];
    }
    appendAll(out, before, tokens);
    at = found + ids.length;
  }
  appendAll(out, rendered.slice(at));
  return out;
}
