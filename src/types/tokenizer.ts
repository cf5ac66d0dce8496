/**
 * The tokenizer contract every tokenizer of nexrl satisfies: the local engine's byte tokenizer
 * and the Hugging Face `tokenizer.json` tokenizers of remote models.
 *
 * @module
 */
/** One chat message, as given to {@link Tokenizer.applyChatTemplate}. */
export interface ChatMessage {
  /** Speaker: `system`, `user`, `assistant`, `tool`, … */
  role: string;
  /** Text of the message. */
  content: string;
}

/** Options of {@link Tokenizer.applyChatTemplate}. */
export interface ChatTemplateOptions {
  /** Append the header of an assistant turn, so that sampling continues as the assistant. */
  addGenerationPrompt?: boolean;
}

/** Options of {@link Tokenizer.encode}. */
export interface EncodeOptions {
  /** Prepend the BOS token (default false). */
  addBos?: boolean;
}

/** Text ↔ token ids, plus the special ids and chat template a model was trained with. */
export interface Tokenizer {
  /** Number of token ids (the model's vocabulary must be at least this large). */
  readonly vocabSize: number;
  /** Beginning-of-sequence id. */
  readonly bosId: number;
  /** End-of-sequence id; it also ends a chat turn and stops sampling. */
  readonly eosId: number;
  /** Padding id. */
  readonly padId: number;
  /** Token ids of `text`. */
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * Text of `ids`, with special tokens left out. Never throws on byte sequences that are not
   * valid UTF-8 (such as a sequence cut inside a character): they decode to U+FFFD.
   * @throws for ids outside the vocabulary.
   */
  decode(ids: ArrayLike<number>): string;
  /** Token ids of a conversation in the model's chat format, starting with BOS. */
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): number[];
}
