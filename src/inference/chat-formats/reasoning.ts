/**
 * Reasoning written between `<think>` and `</think>` (Qwen3, DeepSeek R1 and V3.1 thinking, Kimi
 * K2 Thinking), split out of sampled text; the reasoning parsers' names are SGLang's.
 * @module
 */

/**
 * How reasoning is read out of sampled text (`service.inference_service.reasoning_parser`):
 * - `think_tag` (NexRL's default) and `qwen3`: a leading `<think>…</think>`, or the text up to a
 *   `</think>` when the chat template opened `<think>` in the prompt; a `<think>` never closed
 *   (the sample hit its length) is reasoning to the end;
 * - `deepseek-r1`: the same, and text without `</think>` is reasoning as a whole (R1's template
 *   always opens `<think>` in the prompt);
 * - `gpt-oss`: Harmony's analysis channel (the `gpt_oss` format reads it);
 * - `none`: no reasoning is split out: `<think>` tags stay in the content, Harmony's analysis is left out.
 */
export const REASONING_PARSERS = ["think_tag", "qwen3", "deepseek-r1", "gpt-oss", "none"] as const;

/** A reasoning parser's name. */
export type ReasoningParser = (typeof REASONING_PARSERS)[number];

const OPEN = "<think>";
const CLOSE = "</think>";

/** Text split into reasoning and what follows it. */
export interface SplitReasoning {
  /** The text after the reasoning. */
  content: string;
  /** The reasoning, when there was some (not only white space). */
  reasoning?: string;
}

function split(reasoning: string, content: string): SplitReasoning {
  const thought = reasoning.trim();
  return { content: content.replace(/^\s+/, ""), ...(thought !== "" && { reasoning: thought }) };
}

/**
 * Splits `<think>` reasoning off the start of `text`.
 * @param untagged what text without any `</think>` is: `content` (think_tag, qwen3) or `reasoning` (deepseek-r1).
 */
export function splitThink(text: string, untagged: "content" | "reasoning"): SplitReasoning {
  const start = text.search(/\S/);
  if (start >= 0 && text.startsWith(OPEN, start)) {
    const close = text.indexOf(CLOSE, start + OPEN.length);
    return close < 0
      ? split(text.slice(start + OPEN.length), "")
      : split(text.slice(start + OPEN.length, close), text.slice(close + CLOSE.length));
  }
  const close = text.indexOf(CLOSE);
  if (close >= 0 && !text.slice(0, close).includes(OPEN))
    return split(text.slice(0, close), text.slice(close + CLOSE.length));
  return untagged === "reasoning" ? split(text, "") : { content: text };
}

/** Reasoning as a `<think>` block before the rest of a message, or nothing without reasoning. */
export function thinkBlock(reasoning: string | undefined): string {
  return reasoning === undefined ? "" : `${OPEN}\n${reasoning}\n${CLOSE}\n\n`;
}
