/**
 * A {@link Tokenizer} over a Hugging Face `tokenizer.json` and `tokenizer_config.json`.
 *
 * @module
 */
import { Tokenizer as CoreTokenizer } from "@huggingface/tokenizers";
import {
  decodeAround,
  type ChatMessage,
  type ChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  type Tokenizer,
} from "../../wire/tokenizer.js";
import type { ChatTemplateSource } from "./chat-template.js";
import { chooseChatFormat, type ChatFormat } from "./chat-format.js";
import type { RendererId } from "../renderers/index.js";
import { readTokenizerFolder, type HfTokenizerFiles } from "./files.js";
import { ConfigError, InputError } from "../../errors.js";

/** A special token as `tokenizer_config.json` gives it: its text, an AddedToken object, or null. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && typeof (value as { content?: unknown }).content === "string") {
    return (value as { content: string }).content;
  }
  return undefined;
}

/** `chat_template` of a config, checked to be a template text or a list of named templates. */
function templateOf(config: Record<string, unknown>, source: string): ChatTemplateSource | undefined {
  const value = config.chat_template;
  if (value === undefined || value === null) return undefined;
  const isNamed = (t: unknown) =>
    typeof t === "object" &&
    t !== null &&
    typeof (t as { name?: unknown }).name === "string" &&
    typeof (t as { template?: unknown }).template === "string";
  if (typeof value === "string" || (Array.isArray(value) && value.every(isNamed))) return value as ChatTemplateSource;
  throw new ConfigError(
    `chat_template in tokenizer_config.json of ${source} must be a template text or a list of { name, template }`,
  );
}

/** Options of {@link HfTokenizer}. */
export interface HfTokenizerOptions {
  /**
   * Render chats with nexrl's renderer of this family (`llama3`, `gpt_oss`) instead of the
   * tokenizer's chat template. Unset, the renderer is used only where the template is missing
   * (gpt-oss) or has no tools (a basic Llama 3 template).
   */
  renderer?: RendererId;
}

/**
 * A Hugging Face tokenizer: tokenization by `@huggingface/tokenizers`, chat templates rendered by
 * `@huggingface/jinja`, both as `transformers` does them.
 *
 * Special tokens come from `tokenizer_config.json`: `bos_token`, `eos_token` (required) and
 * `pad_token` (EOS when absent). A model without a BOS token (Qwen) has `bosId` −1 and
 * `encode(text, { addBos: true })` adds nothing, as `transformers` does for such models.
 *
 * `encode` reads the text of special tokens in `text` as those tokens (`"<|im_end|>"` becomes id
 * 151645 for Qwen), as `transformers` and vLLM do; it never adds other special tokens (no EOS).
 */
export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number;
  readonly eosId: number;
  readonly padId: number;
  /** Text of the BOS token, or null when the model has none. */
  readonly bosToken: string | null;
  /** Text of the EOS token. */
  readonly eosToken: string;
  /** Text of the padding token. */
  readonly padToken: string;
  /** The text of the chat template (the named templates' texts one after another), when there is one. */
  readonly chatTemplateText: string | undefined;
  /** The renderer chats are rendered with, or undefined for the model's own Jinja template. */
  readonly renderer: RendererId | undefined;
  /** The renderer's turn-ending tokens (see {@link Tokenizer.turnEndIds}); undefined with the model's own template. */
  readonly turnEndIds: readonly number[] | undefined;
  private readonly core: CoreTokenizer;
  private readonly template: ChatFormat | null;

  /**
   * @param files the parsed tokenizer files.
   * @param source where they came from, for error messages (a folder or a Hub id).
   * @param options the renderer to use instead of the chat template.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} for files the tokenizer cannot be built from, or an unknown
   *   renderer; {@link "nexrl/errors".InputError | InputError} for a chat template that does not parse.
   */
  constructor(files: HfTokenizerFiles, source = "the tokenizer", options: HfTokenizerOptions = {}) {
    try {
      this.core = new CoreTokenizer(files.tokenizerJson, files.tokenizerConfig);
    } catch (error) {
      throw new ConfigError(
        `cannot build a tokenizer from ${source}: ${(error as Error).message}; check that tokenizer.json is complete`,
        { cause: error },
      );
    }
    let maxId = -1;
    for (const id of this.core.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    const config = files.tokenizerConfig;
    const idOf = (key: string, text: string): number => {
      const id = this.core.token_to_id(text);
      if (id === undefined)
        throw new ConfigError(
          `${key} "${text}" of ${source} is not in its vocabulary; fix ${key} in tokenizer_config.json`,
        );
      return id;
    };
    const eos = tokenText(config.eos_token);
    if (eos === undefined)
      throw new ConfigError(
        `tokenizer_config.json of ${source} has no eos_token; add the token that ends a turn (for example "<|im_end|>")`,
      );
    this.eosToken = eos;
    this.eosId = idOf("eos_token", eos);
    this.bosToken = tokenText(config.bos_token) ?? null;
    this.bosId = this.bosToken === null ? -1 : idOf("bos_token", this.bosToken);
    this.padToken = tokenText(config.pad_token) ?? eos;
    this.padId = idOf("pad_token", this.padToken);
    const templateSource = files.chatTemplate ?? templateOf(config, source);
    this.chatTemplateText =
      typeof templateSource === "string" ? templateSource : templateSource?.map((t) => t.template).join("\n");
    const chosen = chooseChatFormat({
      template: templateSource,
      specialTokens: this.specialTokenVariables(config),
      hasToken: (text) => this.core.token_to_id(text) !== undefined,
      renderer: options.renderer,
      source,
    });
    this.template = chosen?.format ?? null;
    this.renderer = chosen?.renderer;
    const turnEnds = chosen?.turnEnds.filter((t) => t !== eos) ?? [];
    this.turnEndIds = turnEnds.length > 0 ? turnEnds.map((t) => idOf("turn end", t)) : undefined;
  }

  /**
   * Loads the tokenizer in `dir` (`tokenizer.json`, `tokenizer_config.json` and an optional
   * `chat_template.jinja`).
   * @param options the renderer to use instead of the chat template.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} when a file is missing or malformed.
   */
  static async fromFolder(dir: string, options: HfTokenizerOptions = {}): Promise<HfTokenizer> {
    return new HfTokenizer(await readTokenizerFolder(dir), dir, options);
  }

  /** Whether the tokenizer renders chats: with its chat template, or a renderer (see {@link HfTokenizer.renderer}). */
  get hasChatTemplate(): boolean {
    return this.template !== null;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids = this.core.encode(text, { add_special_tokens: false }).ids;
    if (options.addBos && this.bosId >= 0) ids.unshift(this.bosId);
    return ids;
  }

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    if (options.unknownIds !== undefined && options.unknownIds !== "throw") {
      const known = (id: number): boolean =>
        Number.isInteger(id) && id >= 0 && id < this.vocabSize && this.core.id_to_token(id) !== undefined;
      const special = options.specialTokens === undefined ? {} : { specialTokens: options.specialTokens };
      return decodeAround(ids, known, (run) => this.decode(run, special), options);
    }
    const list = Array.from(ids);
    list.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize || this.core.id_to_token(id) === undefined) {
        throw new InputError(
          `cannot decode token id ${id} at index ${i}: the tokenizer has ids 0..${this.vocabSize - 1}`,
        );
      }
    });
    return list.length === 0 ? "" : this.core.decode(list, { skip_special_tokens: options.specialTokens !== "keep" });
  }

  /**
   * Text of a conversation in the model's chat format (`tokenize=False` in `transformers`).
   * @throws {@link "nexrl/errors".InputError | InputError} when the tokenizer has no chat template or it fails.
   */
  renderChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!this.template) {
      throw new InputError(
        "this tokenizer has no chat template (no chat_template in tokenizer_config.json and no chat_template.jinja); format the prompt yourself and use completion()",
      );
    }
    return this.template.render(messages, options);
  }

  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    return this.encode(this.renderChatTemplate(messages, options));
  }

  /** The special-token variables `transformers` gives templates (`bos_token`, `eos_token`, …). */
  private specialTokenVariables(config: Record<string, unknown>): Record<string, string> {
    const variables: Record<string, string> = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const text = tokenText(config[key]);
      if (text !== undefined) variables[key] = text;
    }
    return variables;
  }
}
