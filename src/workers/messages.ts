/**
 * Prompt fields as chat messages.
 * @module
 */
import type { ChatMessage } from "../wire/tokenizer.js";
import type { RolloutTask } from "../contracts/task.js";

/** A task's prompt as chat messages: text becomes one user message; messages are used as they are. */
export function promptMessages(prompt: RolloutTask["prompt"]): ChatMessage[] {
  return typeof prompt === "string" ? [{ role: "user", content: prompt }] : [...prompt];
}
