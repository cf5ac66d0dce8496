/**
 * Chat formats: each model family's tool calls and reasoning, read out of sampled text and
 * written back into prompts. {@link chatParserFor} picks a model's format from its chat template
 * (or from the recipe's `tool_parser` / `reasoning_parser`, SGLang's names).
 * @module
 */
import type { Tokenizer, ToolCall } from "../../wire/tokenizer.js";
import { ConfigError } from "../../errors.js";
import { deepseekV3, deepseekV31 } from "./deepseek.js";
import { gptOss } from "./gpt-oss.js";
import { hermes } from "./hermes.js";
import { kimiK2 } from "./kimi-k2.js";
import { llama3 } from "./llama3.js";
import { mistral } from "./mistral.js";
import { qwen3Coder } from "./qwen3-coder.js";
import { REASONING_PARSERS, splitThink, type ReasoningParser } from "./reasoning.js";
import {
  CHAT_FAMILIES,
  joinParts,
  type ChatFamily,
  type ChatFormat,
  type ParsedReply,
  type ParseOptions,
} from "./types.js";

export { CHAT_FAMILIES, type ChatFamily, type ChatFormat, type ParsedReply, type ParseOptions } from "./types.js";
export { REASONING_PARSERS, type ReasoningParser } from "./reasoning.js";

const FORMATS: Readonly<Record<ChatFamily, ChatFormat>> = {
  hermes,
  qwen3_coder: qwen3Coder,
  llama3,
  deepseek_v3: deepseekV3,
  deepseek_v31: deepseekV31,
  gpt_oss: gptOss,
  mistral,
  kimi_k2: kimiK2,
};

/** The recipe's `tool_parser` names (SGLang's) and the family each reads. */
export const TOOL_PARSERS: Readonly<Record<string, ChatFamily>> = {
  qwen25: "hermes",
  hermes: "hermes",
  qwen3_coder: "qwen3_coder",
  llama3: "llama3",
  deepseekv3: "deepseek_v3",
  deepseekv31: "deepseek_v31",
  "gpt-oss": "gpt_oss",
  mistral: "mistral",
  kimi_k2: "kimi_k2",
};

/** The format of `family`. */
export function chatFormat(family: ChatFamily): ChatFormat {
  return FORMATS[family];
}

/**
 * The family a chat template is written for, from the markers in its text; `hermes` for a
 * template that has none of them (or no template).
 */
export function chatFamilyOfTemplate(template: string | undefined): ChatFamily {
  if (template === undefined) return "hermes";
  const has = (marker: string): boolean => template.includes(marker);
  if (has("<|channel|>") || (has("<|start|>") && has("<|message|>"))) return "gpt_oss";
  if (has("<|tool_calls_section_begin|>") || has("<|im_middle|>")) return "kimi_k2";
  if (has("<｜tool▁call▁begin｜>")) return has("```json") ? "deepseek_v3" : "deepseek_v31";
  if (has("<function=")) return "qwen3_coder";
  if (has("[TOOL_CALLS]") || has("[INST]")) return "mistral";
  if (has("<|python_tag|>") || has("<|start_header_id|>")) return "llama3";
  return "hermes";
}

/** Reads replies in one family's format with one reasoning parser. */
export interface ChatParser {
  /** The tool-call format. */
  readonly format: ChatFormat;
  /** The reasoning parser. */
  readonly reasoning: ReasoningParser;
  /**
   * Splits a sampled reply into content, tool calls (when `parseTools` is true) and reasoning; a
   * malformed call stays in the content as text and is counted.
   */
  parse(text: string, options: ParseOptions & { parseTools: boolean }): ParsedReply;
  /** An assistant message's text with its tool calls written as the family's models write them. */
  write(content: string, toolCalls: readonly ToolCall[], reasoning?: string): string;
}

/** What picks a chat parser: the model's template and the recipe's overrides. */
export interface ChatParserChoice {
  /** The text of the model's chat template, when it has one. */
  template?: string;
  /** The family of the nexrl renderer the tokenizer renders chats with, if any; it wins over the template. */
  renderer?: ChatFamily;
  /** A `tool_parser` name (SGLang's: {@link TOOL_PARSERS}) or a family id; overrides the template. */
  toolParser?: string;
  /** A reasoning parser ({@link REASONING_PARSERS}); default `gpt-oss` for Harmony, `think_tag` for the others. */
  reasoningParser?: string;
}

/** The family a `tool_parser` name or family id reads. @throws {@link "nexrl/errors".ConfigError | ConfigError} for an unknown name. */
export function familyOfToolParser(name: string): ChatFamily {
  const family = Object.hasOwn(TOOL_PARSERS, name)
    ? TOOL_PARSERS[name]
    : (CHAT_FAMILIES as readonly string[]).includes(name)
      ? (name as ChatFamily)
      : undefined;
  if (family === undefined)
    throw new ConfigError(`unknown tool parser \`${name}\`; use one of ${Object.keys(TOOL_PARSERS).join(", ")}`);
  return family;
}

/**
 * Whether `reasoning` can read replies of `family`: `gpt-oss` reads Harmony only, and the
 * `<think>` parsers every family but Harmony; a message saying what to set otherwise.
 */
export function reasoningMismatch(family: ChatFamily, reasoning: string): string | undefined {
  if (!(REASONING_PARSERS as readonly string[]).includes(reasoning))
    return `unknown reasoning parser \`${reasoning}\`; use one of ${REASONING_PARSERS.join(", ")}`;
  const harmony = chatFormat(family).channels === true;
  if (reasoning === "none" || harmony === (reasoning === "gpt-oss")) return undefined;
  return harmony
    ? `reasoning parser \`${reasoning}\` reads <think> tags, but gpt-oss writes its reasoning in Harmony's analysis channel: use gpt-oss (or none)`
    : `reasoning parser \`gpt-oss\` reads Harmony's analysis channel, but the ${family} format has none: use think_tag, qwen3 or deepseek-r1 (or none)`;
}

/**
 * The chat parser of a model: the family of `toolParser`, else of the template's markers; the
 * reasoning parser given, else the family's own.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an unknown name, or a reasoning parser that cannot read the family.
 */
export function chatParserFor(choice: ChatParserChoice = {}): ChatParser {
  const family =
    choice.toolParser !== undefined
      ? familyOfToolParser(choice.toolParser)
      : (choice.renderer ?? chatFamilyOfTemplate(choice.template));
  const format = chatFormat(family);
  const reasoning = choice.reasoningParser ?? (format.channels ? "gpt-oss" : "think_tag");
  const mismatch = reasoningMismatch(family, reasoning);
  if (mismatch) throw new ConfigError(mismatch);
  return {
    format,
    reasoning: reasoning as ReasoningParser,
    parse: (text, options) => parseReply(format, reasoning as ReasoningParser, text, options),
    write: (content, toolCalls, thought) => format.write(content, toolCalls, thought),
  };
}

const templateParsers = new WeakMap<Tokenizer, ChatParser>();

/** What `tokenizer` says of the format its model writes: its renderer's family, or its chat template. */
export function tokenizerChoice(tokenizer: Tokenizer): Pick<ChatParserChoice, "template" | "renderer"> {
  return {
    ...(tokenizer.renderer !== undefined && { renderer: tokenizer.renderer }),
    ...(tokenizer.chatTemplateText !== undefined && { template: tokenizer.chatTemplateText }),
  };
}

/** The chat parser of the format `tokenizer`'s renderer or chat template writes (picked once per tokenizer). */
export function templateChatParser(tokenizer: Tokenizer): ChatParser {
  let parser = templateParsers.get(tokenizer);
  if (!parser) {
    parser = chatParserFor(tokenizerChoice(tokenizer));
    templateParsers.set(tokenizer, parser);
  }
  return parser;
}

function parseReply(
  format: ChatFormat,
  reasoning: ReasoningParser,
  text: string,
  options: ParseOptions & { parseTools: boolean },
): ParsedReply {
  if (format.channels) {
    const { reasoning: analysis, ...parsed } = format.parse(text, options);
    const thought = reasoning !== "none" && analysis !== undefined ? { reasoning: analysis } : {};
    if (options.parseTools) return { ...parsed, ...thought };
    // Without tools asked for, the arguments of a call the model wrote anyway are answered as text.
    const content = joinParts([parsed.content, ...parsed.toolCalls.map((call) => call.function.arguments)]);
    return { content, toolCalls: [], ...thought, malformed: 0 };
  }
  const split =
    reasoning === "none" ? { content: text } : splitThink(text, reasoning === "deepseek-r1" ? "reasoning" : "content");
  const parsed = options.parseTools
    ? format.parse(split.content, options)
    : { content: split.content, toolCalls: [], malformed: 0 };
  return { ...parsed, ...(split.reasoning !== undefined && { reasoning: split.reasoning }) };
}
