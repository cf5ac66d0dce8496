/**
 * The mark of an assistant message that stands for a completion the model sampled.
 *
 * @module
 */
import type { ChatMessage, ToolCall } from "../../wire/tokenizer.js";

/**
 * Set by the agent gateway on an assistant message whose content stands for the
 * tokens the model sampled after the generation prompt (the gateway splices those tokens in
 * place of the content). Renderers write such a message as the generation prompt followed by the
 * content, with no header or end token of their own: the sampled tokens carry the model's own
 * (Harmony's channels and `<|call|>`/`<|return|>`, Llama's `<|eom_id|>` or `<|eot_id|>`). Its value
 * is the message's tool calls, which the message itself no longer lists (so that templates do not
 * write them twice) but which later tool results refer to. Jinja templates do not see it.
 */
export const SAMPLED_COMPLETION: unique symbol = Symbol("nexrl.sampledCompletion");

/** A chat message that may carry {@link SAMPLED_COMPLETION}. */
export type MaybeSampled = ChatMessage & { readonly [SAMPLED_COMPLETION]?: readonly ToolCall[] };

/** Whether `message` stands for a sampled completion. */
export function isSampledCompletion(message: ChatMessage): boolean {
  return (message as MaybeSampled)[SAMPLED_COMPLETION] !== undefined;
}

/** The tool calls `message` makes, listed or, for a sampled completion, carried by its mark. */
export function toolCallsOf(message: ChatMessage): readonly ToolCall[] {
  return message.tool_calls ?? (message as MaybeSampled)[SAMPLED_COMPLETION] ?? [];
}
