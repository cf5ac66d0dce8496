/**
 * The tokenizer contract every tokenizer of nexrl satisfies: the local engine's byte tokenizer
 * and the Hugging Face `tokenizer.json` tokenizers of remote models.
 *
 * @module
 */

/** A function call an assistant message makes (OpenAI's `tool_calls[]` entry). */
export interface ToolCall {
  /** Id the tool's answer refers to in `tool_call_id`. */
  id: string;
  /** Always `function`. */
  type: "function";
  /** The function called. */
  function: {
    /** Name of the function. */
    name: string;
    /** Arguments as a JSON text (as the model wrote them). */
    arguments: string;
  };
}

/** A tool the model may call (OpenAI's `tools[]` entry), passed to chat templates as it is. */
export interface ToolDefinition {
  /** Always `function`. */
  type: "function";
  /** The function's signature. */
  function: {
    /** Name of the function. */
    name: string;
    /** What it does. */
    description?: string;
    /** JSON schema of its arguments. */
    parameters?: Record<string, unknown>;
  };
}

/** One chat message, as given to {@link Tokenizer.applyChatTemplate}. */
export interface ChatMessage {
  /** Speaker: `system`, `user`, `assistant`, `tool`, … */
  role: string;
  /** Text of the message; `""` for an assistant message that only calls tools. */
  content: string;
  /** Calls an assistant message makes. */
  tool_calls?: ToolCall[];
  /** For a `tool` message: the id of the call it answers. */
  tool_call_id?: string;
  /** Name of the speaker or, for a `tool` message, of the function that answered. */
  name?: string;
}

/** Options of {@link Tokenizer.applyChatTemplate}. */
export interface ChatTemplateOptions {
  /** Append the header of an assistant turn, so that sampling continues as the assistant. */
  addGenerationPrompt?: boolean;
  /** Tools the model may call; templates that support tools describe them in the prompt. */
  tools?: readonly ToolDefinition[];
  /**
   * Extra variables for the chat template, such as Qwen3's `{ enable_thinking: false }` (vLLM's
   * `chat_template_kwargs`). Tokenizers without a Jinja template ignore them.
   */
  chatTemplateKwargs?: Record<string, unknown>;
}

/** Options of {@link Tokenizer.encode}. */
export interface EncodeOptions {
  /** Prepend the BOS token (default false); adds nothing when the model has no BOS (`bosId` −1). */
  addBos?: boolean;
}

/** Text ↔ token ids, plus the special ids and chat template a model was trained with. */
export interface Tokenizer {
  /** Number of token ids (the model's vocabulary must be at least this large). */
  readonly vocabSize: number;
  /** Beginning-of-sequence id, or −1 when the model has none (Qwen). */
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
  /** Token ids of a conversation in the model's chat format, starting with BOS when the model has one. */
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): number[];
}
