/**
 * The one place that decides how a Hugging Face tokenizer renders chats: its Jinja chat template,
 * or one of nexrl's renderers where the template is missing or cannot express tools.
 *
 * @module
 */
import { createRenderer, RENDERER_IDS, type RendererId } from "../renderers/index.js";
import type { ChatMessage, ChatTemplateOptions } from "../../wire/tokenizer.js";
import { ChatTemplate, type ChatTemplateSource } from "./chat-template.js";
import { ConfigError } from "../../errors.js";

/** Renders conversations as text: a Jinja {@link ChatTemplate} or a renderer. */
export interface ChatFormat {
  render(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string;
}

/** What a tokenizer renders chats with. */
export interface ChosenChatFormat {
  format: ChatFormat;
  /** The renderer's family, or undefined for the model's Jinja template. */
  renderer: RendererId | undefined;
  /** Special tokens besides EOS that end an assistant's turn (the renderer's; none for a Jinja template). */
  turnEnds: readonly string[];
}

/** What {@link chooseChatFormat} looks at. */
export interface ChatFormatInputs {
  /** The model's chat template(s), when it ships any. */
  template: ChatTemplateSource | undefined;
  /** Variables every Jinja render sees (`bos_token`, …). */
  specialTokens: Readonly<Record<string, string>>;
  /** Whether the vocabulary has `text` as one token. */
  hasToken: (text: string) => boolean;
  /** A renderer asked for by family id (`HfTokenizerOptions.renderer`). */
  renderer?: string | undefined;
  /** Where the tokenizer came from, for messages. */
  source: string;
}

function templateTexts(template: ChatTemplateSource): string[] {
  return typeof template === "string" ? [template] : template.map((t) => t.template);
}

/**
 * Which renderer, if any, stands in for the model's template:
 * - a Llama 3 header template (`<|start_header_id|>`) that never mentions tools (the basic
 *   template some Llama 3.1 packages ship) on a vocabulary with Llama 3.1's tool tokens → `llama3`;
 * - no template at all on a vocabulary with Harmony's tokens (`<|channel|>`, `<|constrain|>`, …) → `gpt_oss`.
 */
function detectRenderer(inputs: ChatFormatInputs): RendererId | undefined {
  const has = (id: RendererId) => createRenderer(id).specialTokens.every(inputs.hasToken);
  if (inputs.template === undefined) return has("gpt_oss") ? "gpt_oss" : undefined;
  const texts = templateTexts(inputs.template);
  const llama3Basic = texts.some((t) => t.includes("<|start_header_id|>")) && !texts.some((t) => /\btools\b/.test(t));
  return llama3Basic && has("llama3") ? "llama3" : undefined;
}

/**
 * How a tokenizer renders chats: the renderer asked for, else a renderer where the template is
 * missing or lacks tools (see {@link detectRenderer}), else the model's Jinja template; null when
 * there is nothing to render with.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an unknown renderer id, or a vocabulary without its special tokens;
 *   {@link "nexrl/errors".InputError | InputError} for a template that does not parse.
 */
export function chooseChatFormat(inputs: ChatFormatInputs): ChosenChatFormat | null {
  const asked = inputs.renderer;
  if (asked !== undefined) {
    if (!(RENDERER_IDS as readonly string[]).includes(asked)) {
      throw new ConfigError(
        `there is no "${asked}" chat renderer; nexrl renders ${RENDERER_IDS.join(" and ")} itself, every other family with its own chat template (leave the renderer unset)`,
      );
    }
    const renderer = createRenderer(asked as RendererId);
    const missing = renderer.specialTokens.filter((t) => !inputs.hasToken(t));
    if (missing.length > 0) {
      throw new ConfigError(
        `the ${asked} renderer writes ${missing.join(", ")}, which the tokenizer of ${inputs.source} does not have as tokens; use the tokenizer of a ${asked} model`,
      );
    }
    return { format: renderer, renderer: renderer.id, turnEnds: renderer.turnEnds };
  }
  const detected = detectRenderer(inputs);
  if (detected !== undefined) {
    const renderer = createRenderer(detected);
    return { format: renderer, renderer: detected, turnEnds: renderer.turnEnds };
  }
  if (inputs.template === undefined) return null;
  return { format: new ChatTemplate(inputs.template, inputs.specialTokens), renderer: undefined, turnEnds: [] };
}
