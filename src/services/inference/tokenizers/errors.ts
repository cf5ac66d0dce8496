/**
 * Errors of the Hugging Face tokenizers. Each says what was wrong and how to fix it.
 *
 * @module
 */
import { NexrlError } from "../../../types/errors.js";

/** Tokenizer files that are missing, unreadable, malformed or cannot be downloaded. */
export class TokenizerLoadError extends NexrlError {}

/** A chat template that is missing or fails to render the given conversation. */
export class ChatTemplateError extends NexrlError {}
