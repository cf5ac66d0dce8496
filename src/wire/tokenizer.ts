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

/**
 * One chat message, as given to {@link Tokenizer.applyChatTemplate}. `tool_calls` and
 * `tool_call_id` keep OpenAI's message shape (snake_case), which chat templates and agents read as is.
 */
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
  /**
   * The reasoning of an assistant message, apart from its content (vLLM's `reasoning_content`):
   * templates that read it (Qwen3) and the Harmony renderer (the analysis channel) write it.
   */
  reasoning_content?: string;
}

/** Ids of the model families nexrl renders itself (ids shared with the tool-call parsers). */
export const RENDERER_IDS = ["llama3", "gpt_oss"] as const;

/** A model family nexrl renders itself: `llama3` (Llama 3.1–3.3 with tools), `gpt_oss` (Harmony). */
export type RendererId = (typeof RENDERER_IDS)[number];

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

/**
 * What {@link Tokenizer.decode} does with an id it has no token for: an id at or beyond
 * `vocabSize` (real models have more embedding rows than their tokenizer has ids — Qwen3 has
 * 151,936 rows for 151,669 ids — and a sampler can return one), a hole in the vocabulary, or a
 * value that is not an id at all.
 * - `throw` (the default): strict decoding, a `InputError`;
 * - `skip`: the id decodes to nothing;
 * - `placeholder`: the id decodes to {@link unknownTokenPlaceholder} (`<unk:ID>`), visible in text.
 */
export type UnknownIdHandling = "throw" | "skip" | "placeholder";

/** Options of {@link Tokenizer.decode}. */
export interface DecodeOptions {
  /** What ids without a token become (default `throw`). */
  unknownIds?: UnknownIdHandling;
  /** Called for each id without a token when they are skipped or replaced (e.g. to count them). */
  onUnknownId?: (id: number, index: number) => void;
  /**
   * Special tokens (`<|im_end|>`, `<|python_tag|>`, Harmony's `<|channel|>`): left out (`skip`,
   * the default) or written as their text (`keep`), as chat formats whose markers are special
   * tokens need to read them.
   */
  specialTokens?: "skip" | "keep";
}

/** The text an unknown id decodes to under `unknownIds: "placeholder"`. */
export function unknownTokenPlaceholder(id: number): string {
  return `<unk:${id}>`;
}

/**
 * Decodes `ids` the way the text of `known` ids reads, with each unknown id skipped or replaced by
 * its placeholder and reported (the shared tolerant half of every tokenizer's `decode`).
 * @param decodeKnown decodes a run of known ids.
 */
export function decodeAround(
  ids: ArrayLike<number>,
  isKnown: (id: number) => boolean,
  decodeKnown: (known: number[]) => string,
  options: DecodeOptions,
): string {
  const placeholder = options.unknownIds === "placeholder";
  let text = "";
  let run: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (isKnown(id)) {
      run.push(id);
      continue;
    }
    options.onUnknownId?.(id, i);
    if (placeholder) {
      text += decodeKnown(run) + unknownTokenPlaceholder(id);
      run = [];
    }
  }
  return text + decodeKnown(run);
}

/** What {@link decodeTolerantly} read. */
export interface TolerantDecoding {
  /** The text, unknown ids skipped or shown as placeholders. */
  text: string;
  /** How many ids had no token. */
  unknownIds: number;
}

/**
 * Decodes text for a rollout: ids the tokenizer has no token for stay in the token list (the
 * trajectory keeps them) but decode to nothing, or to a visible placeholder; their number is
 * returned so that the run can count them.
 */
export function decodeTolerantly(
  tokenizer: Tokenizer,
  ids: ArrayLike<number>,
  unknownIds: Exclude<UnknownIdHandling, "throw"> = "skip",
): TolerantDecoding {
  let count = 0;
  const text = tokenizer.decode(ids, { unknownIds, onUnknownId: () => count++ });
  return { text, unknownIds: count };
}

/**
 * The tokens of a text prompt: `text` encoded with BOS first (when the model has one). This is
 * nexrl's one BOS rule. A whole sequence starts with BOS: a text prompt given to
 * `InferenceClient.completion()` is encoded this way, chat templates write BOS themselves, and the
 * `sft` worker encodes text prompts this way, so that trained and sampled sequences begin alike.
 * `Tokenizer.encode` adds no BOS unless asked (`addBos: true`), because it also encodes pieces
 * that continue a sequence (an answer after its prompt).
 */
export function encodePrompt(tokenizer: Tokenizer, text: string): number[] {
  return tokenizer.encode(text, { addBos: true });
}

/** Text ↔ token ids, plus the special ids and chat template a model was trained with. */
export interface Tokenizer {
  /** Number of token ids (the model's vocabulary must be at least this large). */
  readonly vocabSize: number;
  /** Beginning-of-sequence id, or −1 when the model has none (Qwen). */
  readonly bosId: number;
  /** End-of-sequence id; it also ends a chat turn and stops sampling. */
  readonly eosId: number;
  /**
   * Ids besides {@link Tokenizer.eosId} that end an assistant's turn, at which chat sampling
   * stops: Harmony's `<|call|>` (a tool call) and `<|return|>`, Llama 3's `<|eom_id|>`. Absent
   * for formats whose turns end with EOS only.
   */
  readonly turnEndIds?: readonly number[];
  /** Padding id. */
  readonly padId: number;
  /** The text of the model's chat template, when it has one (its markers say which chat format the model writes). */
  readonly chatTemplateText?: string;
  /** The nexrl renderer chats are rendered with instead of the template, when one is (its family is the chat format). */
  readonly renderer?: RendererId | undefined;
  /** Token ids of `text`. */
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * Text of `ids`, with special tokens left out. Never throws on byte sequences that are not
   * valid UTF-8 (such as a sequence cut inside a character): they decode to U+FFFD.
   * @param options what ids without a token become (default: an error).
   * @throws for ids outside the vocabulary, unless `options.unknownIds` says otherwise.
   */
  decode(ids: ArrayLike<number>, options?: DecodeOptions): string;
  /** Token ids of a conversation in the model's chat format, starting with BOS when the model has one. */
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): number[];
}
