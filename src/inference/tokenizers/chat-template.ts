/**
 * Chat templates of Hugging Face tokenizers, rendered with `@huggingface/jinja` the way
 * `transformers`' `apply_chat_template` renders them.
 *
 * @module
 */
import { Template } from "@huggingface/jinja";
import type { ChatMessage, ChatTemplateOptions, ToolCall } from "../../wire/tokenizer.js";
import { InputError } from "../../errors.js";

/** `chat_template` as `tokenizer_config.json` stores it: one template, or several by name. */
export type ChatTemplateSource = string | ReadonlyArray<{ name: string; template: string }>;

/**
 * A model's chat template(s). When the config names several, `tool_use` renders conversations
 * with tools and `default` the others, as in `transformers`.
 */
export class ChatTemplate {
  private readonly templates = new Map<string, Template>();
  /**
   * Whether an assistant message that only calls tools is given `content: null` (as OpenAI
   * clients send it) rather than `""`: templates that write tool calls only when the content
   * `is none` (DeepSeek V3's) would otherwise drop the calls. Probed once per template.
   */
  private readonly nullContentForCalls: boolean;

  /**
   * @param source the template text, or the named templates.
   * @param specialTokens variables every render sees, such as `bos_token` and `eos_token`.
   * @throws {@link "nexrl/errors".InputError | InputError} when a template does not parse.
   */
  constructor(
    source: ChatTemplateSource,
    private readonly specialTokens: Readonly<Record<string, string>>,
  ) {
    const named = typeof source === "string" ? [{ name: "default", template: source }] : source;
    for (const { name, template } of named) {
      try {
        this.templates.set(name, new Template(template));
      } catch (error) {
        throw new InputError(
          `the chat template "${name}" does not parse (${(error as Error).message}); fix chat_template in tokenizer_config.json`,
          { cause: error },
        );
      }
    }
    if (!this.templates.has("default")) {
      throw new InputError(
        `tokenizer_config.json names chat templates [${[...this.templates.keys()].join(", ")}] but none is "default"; add a "default" template`,
      );
    }
    this.nullContentForCalls = this.writesCallsOnlyForNullContent();
  }

  private writesCallsOnlyForNullContent(): boolean {
    const name = "nexrl_probe_function";
    const call: ToolCall = { id: "call_probe", type: "function", function: { name, arguments: "{}" } };
    const writes = (content: string | null): boolean => {
      try {
        const messages = [
          { role: "user", content: "x" },
          { role: "assistant", content, tool_calls: [call] },
        ];
        return this.templates
          .get("default")!
          .render({ ...this.specialTokens, messages })
          .includes(name);
      } catch {
        return false;
      }
    };
    return !writes("") && writes(null);
  }

  /**
   * Text of `messages` in the chat format. `chatTemplateKwargs` may override the special-token
   * variables but not `messages`, `tools` or `add_generation_prompt`.
   * @throws {@link "nexrl/errors".InputError | InputError} when the template raises or fails on the conversation.
   */
  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const hasTools = (options.tools?.length ?? 0) > 0;
    const template = (hasTools && this.templates.get("tool_use")) || this.templates.get("default")!;
    try {
      return template.render({
        ...this.specialTokens,
        ...options.chatTemplateKwargs,
        messages: messages.map((m) =>
          this.nullContentForCalls && m.role === "assistant" && m.content === "" && m.tool_calls?.length
            ? { ...m, content: null }
            : { ...m },
        ),
        ...(hasTools && { tools: options.tools }),
        add_generation_prompt: options.addGenerationPrompt ?? false,
      });
    } catch (error) {
      throw new InputError(`the chat template failed on this conversation: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
}
