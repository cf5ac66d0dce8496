/**
 * Prompt fields as chat messages.
 * @module
 */
import type { ChatMessage } from "../../types/tokenizer.js";
import { NexrlError } from "../../errors.js";

/**
 * A prompt field as chat messages: text becomes one user message; an array of `{role, content}`
 * objects is used as it is.
 * @param where names the row, for the error.
 * @throws NexrlError for any other prompt value.
 */
export function promptMessages(prompt: unknown, where: string): ChatMessage[] {
  if (typeof prompt === "string") return [{ role: "user", content: prompt }];
  if (
    Array.isArray(prompt) &&
    prompt.every(
      (m) => typeof m === "object" && m !== null && typeof m.role === "string" && typeof m.content === "string",
    )
  ) {
    return prompt as ChatMessage[];
  }
  throw new NexrlError(
    `${where}: the prompt must be text or a list of {role, content} messages, got ${JSON.stringify(prompt)?.slice(0, 80)}`,
  );
}
