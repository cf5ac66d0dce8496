/**
 * The contract of nexrl's own chat renderers, used for model families whose tokenizer has no
 * usable chat template.
 *
 * @module
 */
import type { ChatMessage, ChatTemplateOptions, RendererId } from "../../wire/tokenizer.js";
import { InputError } from "../../errors.js";

export { RENDERER_IDS, type RendererId } from "../../wire/tokenizer.js";

/** A chat format written in TypeScript: conversation → text with the model's special tokens. */
export interface ChatRenderer {
  /** The family it renders. */
  readonly id: RendererId;
  /** Special tokens the text uses; the tokenizer must have each as one token. */
  readonly specialTokens: readonly string[];
  /** Special tokens that end an assistant's turn (a tool call's included), at which sampling a chat stops. */
  readonly turnEnds: readonly string[];
  /**
   * Text of `messages` in the model's format.
   * @throws {@link "nexrl/errors".InputError | InputError} for a conversation or option the format cannot express.
   */
  render(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string;
}

/**
 * `chatTemplateKwargs` checked against the keys a renderer reads: any other key is refused, so
 * that no setting is silently ignored.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the unknown key and the known ones.
 */
export function renderKwargs(
  id: RendererId,
  options: ChatTemplateOptions,
  known: readonly string[],
): Readonly<Record<string, unknown>> {
  const kwargs = options.chatTemplateKwargs ?? {};
  for (const key of Object.keys(kwargs)) {
    if (!known.includes(key)) {
      throw new InputError(
        `chat_template_kwargs.${key} is not read by the ${id} renderer; it reads ${known.join(", ")}`,
        { field: `chat_template_kwargs.${key}` },
      );
    }
  }
  return kwargs;
}
