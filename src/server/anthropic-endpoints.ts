/**
 * Anthropic's Messages API, once for both servers that speak it (`nexrl serve` and the agent
 * gateway): a request is translated into the one chat path of {@link OpenAIEndpoints.generateChat}
 * and its choice answered as a `Message`, streamed or not, with failures in Anthropic's error
 * shape (routes run it through {@link OpenAIEndpoints.answer} with `sendAnthropicError`).
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { GenerationRequest } from "./openai-protocol.js";
import type { GeneratorFor, OpenAIEndpoints } from "./openai-endpoints.js";
import {
  anthropicMessages,
  anthropicRequestSchemas,
  anthropicTools,
  messageBody,
  messageEvents,
  newMessageId,
  newToolUseId,
  parseAnthropicRequest,
  sendAnthropicEvents,
  thinkingKwargs,
  type CountTokensRequest,
  type ToolArguments,
} from "./anthropic-protocol.js";
import { sendJson } from "./io.js";

/** Options of one Messages call. */
export interface MessagesCallOptions {
  /** How tool_use blocks sent back are written as tool call arguments (default: compact JSON of `input`). */
  argumentsOf?: ToolArguments;
}

/**
 * `POST /v1/messages` and `POST /v1/messages/count_tokens` over a server's
 * {@link OpenAIEndpoints}: `system`, text / tool_use / tool_result / thinking blocks, `tools`,
 * `tool_choice`, `max_tokens`, `stop_sequences`, `temperature`, `top_p`, `top_k`, `thinking`
 * (the chat template's `enable_thinking`) and `stream`, each translated to the chat path every
 * dialect shares.
 */
export class AnthropicMessages {
  private readonly schemas: ReturnType<typeof anthropicRequestSchemas>;

  /**
   * @param endpoints the server's OpenAI endpoints (body limit, chat rendering and sampling).
   * @param server names the server in refusals.
   */
  constructor(
    private readonly endpoints: OpenAIEndpoints,
    private readonly server: string,
  ) {
    this.schemas = anthropicRequestSchemas(server);
  }

  /** Answers `POST /v1/messages` with the generator `generatorFor` picks for the request's sampling fields. */
  async create(
    req: IncomingMessage,
    res: ServerResponse,
    generatorFor: GeneratorFor<GenerationRequest>,
    options: MessagesCallOptions = {},
  ): Promise<void> {
    const request = parseAnthropicRequest(this.schemas.create, await this.endpoints.readBody(req), this.server);
    const messages = anthropicMessages(request, options.argumentsOf);
    const sampling: GenerationRequest = {
      model: request.model,
      ...(request.temperature !== undefined && { temperature: request.temperature }),
      ...(request.top_p !== undefined && { top_p: request.top_p }),
      ...(request.top_k !== undefined && { top_k: request.top_k }),
      ...(request.stop_sequences?.length && { stop: request.stop_sequences }),
    };
    const generator = await generatorFor(sampling);
    const tools = anthropicTools(request);
    const kwargs = thinkingKwargs(request);
    const { choices, promptTokens } = await this.endpoints.generateChat(generator, {
      request: sampling,
      messages,
      ...(tools && { tools }),
      parseTools: (tools?.length ?? 0) > 0 && request.tool_choice?.type !== "none",
      maxTokens: request.max_tokens,
      ...(kwargs && { chatTemplateKwargs: kwargs }),
      dialect: "messages",
      newToolCallId: newToolUseId,
    });
    const format = { id: newMessageId(), model: request.model };
    const choice = choices[0]!;
    if (request.stream) sendAnthropicEvents(res, messageEvents(format, promptTokens, choice, generator.tokenizer));
    else sendJson(res, 200, messageBody(format, promptTokens, choice));
  }

  /** Answers `POST /v1/messages/count_tokens`: the length of the prompt the request renders to, as it would be sampled. */
  async countTokens(
    req: IncomingMessage,
    res: ServerResponse,
    generatorFor: GeneratorFor<GenerationRequest>,
    options: MessagesCallOptions = {},
  ): Promise<void> {
    const request: CountTokensRequest = parseAnthropicRequest(
      this.schemas.countTokens,
      await this.endpoints.readBody(req),
      this.server,
    );
    const generator = await generatorFor({ model: request.model });
    const tools = anthropicTools(request);
    const kwargs = thinkingKwargs(request);
    const prompt = this.endpoints.chatPrompt(generator, {
      messages: anthropicMessages(request, options.argumentsOf),
      ...(tools && { tools }),
      ...(kwargs && { chatTemplateKwargs: kwargs }),
    });
    sendJson(res, 200, { input_tokens: prompt.length });
  }
}
