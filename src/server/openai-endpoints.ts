/**
 * The OpenAI-compatible endpoints, once for both servers that speak them: `nexrl serve`
 * (`openai.ts`, answering from local models) and the agent gateway (`agent/gateway.ts`,
 * recording every call and forwarding it to the rollout's policy). This module reads and checks
 * requests, renders chats, encodes prompts, writes answers and streams, and turns every failure
 * into OpenAI's error shape; a server gives only an {@link OpenAIGenerator}, which samples.
 *
 * @module
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { z } from "zod";
import type { SamplingParams } from "../wire/results.js";
import type { ChatMessage, ChatTemplateOptions, Tokenizer, ToolDefinition } from "../wire/tokenizer.js";
import {
  chatCompletionBody,
  chatCompletionEvents,
  completionBody,
  completionEvents,
  cutAtStop,
  openAIErrorOf,
  openAIRequestSchemas,
  parseOpenAIRequest,
  readOpenAIBody,
  requestMessages,
  requestTools,
  responseFormat,
  sendOpenAIError,
  sendOpenAIEvents,
  stopStrings,
  type ChatRequest,
  type ChoiceFinishReason,
  type CompletionRequest,
  type GeneratedChoice,
  type GenerationRequest,
} from "./openai-protocol.js";
import { clientGone, sendJson } from "./io.js";
import { MAX_SAMPLES_PER_REQUEST } from "./limits.js";
import { templateChatParser, type ChatParser } from "../inference/chat-formats/index.js";
import { sampledText, withoutSpecialTokens } from "../inference/chat-formats/sampled-text.js";
import { ProtocolError } from "../errors.js";

/** How a chat call's answers are read: its conversation, tools and the model's chat format. */
export interface ChatGeneration {
  /** The conversation. */
  messages: ChatMessage[];
  /** Whether tool calls are to be parsed out of the answer. */
  parseTools: boolean;
  /** The tools offered (their schemas type the values of XML calls). */
  tools?: ToolDefinition[];
  /** Reads tool calls and reasoning in the model family's format. */
  parser: ChatParser;
  /** The dialect called. */
  dialect?: ChatDialect;
  /** How the dialect writes tool call ids (default {@link newToolCallId}: `call_…`). */
  newToolCallId?: () => string;
}

/** What a generation call asks for beyond the request's sampling fields. */
export interface GenerationCall {
  /** `max_completion_tokens` or `max_tokens` of the request; undefined when it gives neither. */
  maxTokens: number | undefined;
  /** Chat calls only: the conversation, and how tool calls and reasoning are parsed out of the answer. */
  chat?: ChatGeneration;
}

/** The chat endpoint a call came through. */
export type ChatDialect = "chat.completions" | "messages" | "responses";

/** A conversation to sample, as every chat dialect translates its request. */
export interface ChatCall {
  /** The sampling fields (`n`, `temperature`, `stop`, vLLM's options, …) in chat completions' names. */
  request: GenerationRequest;
  /** The conversation. */
  messages: ChatMessage[];
  /** Function tools the chat template is to show the model. */
  tools?: ToolDefinition[];
  /** Whether tool calls are to be parsed out of the answer (tools given and not `tool_choice: none`). */
  parseTools: boolean;
  /** Largest number of tokens to sample; undefined leaves it to the server. */
  maxTokens: number | undefined;
  /** End the prompt with the assistant's turn opening (default true). */
  addGenerationPrompt?: boolean;
  /** Extra variables for the chat template (`enable_thinking`, …). */
  chatTemplateKwargs?: Record<string, unknown>;
  /** The endpoint called (default `chat.completions`), as the agent gateway records it. */
  dialect?: ChatDialect;
  /** Makes the id of each tool call parsed out of the answer, in the dialect's form (default: the server's). */
  newToolCallId?: () => string;
}

/** The choices of one prompt, and the prompt's token ids as the model read them. */
export interface Generation {
  /** The choices, in order. */
  choices: GeneratedChoice[];
  /** The prompt's token ids as the model read them. */
  promptTokens: number[];
}

/** Who answers a server's generation requests: the one part `nexrl serve` and the agent gateway do differently. */
export interface OpenAIGenerator {
  /** Encodes text prompts, renders chats (unless {@link OpenAIGenerator.renderChat} does) and decodes answers. */
  readonly tokenizer: Tokenizer;
  /** The prompt of a chat; default: the tokenizer's chat template. */
  renderChat?(messages: ChatMessage[], options: ChatTemplateOptions): number[];
  /** Reads tool calls and reasoning out of chat answers; default: the format the tokenizer's chat template writes. */
  readonly chatParser?: ChatParser;
  /** Samples the choices of `prompt` (`request.n` of them where the server allows that), decoded with {@link decodedChoice}. */
  generate(prompt: number[], request: GenerationRequest, call: GenerationCall): Promise<Generation>;
}

/** Answers a failure in a dialect's error shape (or drops the connection when a stream has begun). */
export type ErrorWriter = (res: ServerResponse, error: ProtocolError, headers?: Record<string, string>) => void;

/** Picks the generator of a parsed request, or throws a {@link ProtocolError} to refuse it. */
export type GeneratorFor<R> = (request: R) => OpenAIGenerator | Promise<OpenAIGenerator>;

/** Options of {@link OpenAIEndpoints}. */
export interface OpenAIEndpointsOptions {
  /** Names the server in messages about unsupported options (`nexrl serve`). */
  server: string;
  /** Largest request body in bytes. */
  maxBodyBytes: number;
  /** Receives a line per failure of the model (500 answer), naming the method and path. */
  log: (line: string) => void;
}

/** The sampling parameters a request asks for, with `maxTokens` decided by the server. */
export function requestSampling(request: GenerationRequest, maxTokens: number): SamplingParams & { stop?: string[] } {
  const stops = stopStrings(request.stop);
  return {
    maxTokens,
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { topP: request.top_p }),
    ...(request.top_k != null && { topK: request.top_k }),
    ...(request.seed != null && { seed: request.seed }),
    ...(stops.length > 0 && { stop: stops }),
  };
}

/** A new tool call's id, `call_` and 96 random bits. */
export function newToolCallId(): string {
  return `call_${randomBytes(12).toString("base64url")}`;
}

/**
 * A sampled sequence as a choice: its text decoded and cut at the stop string that ended it
 * (unless the request keeps it); for a chat, split by `chat.parser` into content, reasoning and
 * tool calls (finish reason `tool_calls` when there are any), special tokens read as text so that
 * formats whose markers are special tokens find them.
 */
export function decodedChoice(
  tokenizer: Tokenizer,
  tokens: number[],
  logprobs: number[],
  finishReason: ChoiceFinishReason,
  request: GenerationRequest,
  chat?: ChatGeneration,
): GeneratedChoice {
  const stops = stopStrings(request.stop);
  const keepStop = request.include_stop_str_in_output ?? false;
  const cut = cutAtStop(tokenizer, tokens, finishReason, stops, keepStop);
  if (!chat) return { tokens, logprobs, finishReason, ...cut };
  const sampled = sampledText(tokenizer, tokens, cut.text);
  const reply = chat.parser.parse(sampled.text, {
    newId: chat.newToolCallId ?? newToolCallId,
    parseTools: chat.parseTools,
    ...(chat.tools && { tools: chat.tools }),
  });
  const clean = (text: string) => withoutSpecialTokens(text, sampled.specialTokens);
  return {
    tokens,
    logprobs,
    finishReason: reply.toolCalls.length > 0 ? "tool_calls" : finishReason,
    stopReason: cut.stopReason,
    text: clean(reply.content),
    ...(reply.toolCalls.length > 0 && { toolCalls: reply.toolCalls }),
    ...(reply.reasoning !== undefined && { reasoning: clean(reply.reasoning) }),
    ...(reply.malformed > 0 && { malformedToolCalls: reply.malformed }),
  };
}

/** The `/v1/models` entry of a model. */
export function modelEntry(id: string, created: number) {
  return { id, object: "model", created, owned_by: "nexrl" };
}

/** The `/v1/models` answer listing `ids`. */
export function modelList(ids: readonly string[], created: number) {
  return { object: "list", data: ids.map((id) => modelEntry(id, created)) };
}

/** A request's path without the query string and trailing slashes. */
export function endpointPath(req: IncomingMessage): string {
  return (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
}

/**
 * The OpenAI-compatible endpoints of one server: {@link OpenAIEndpoints.answer} runs any route
 * in OpenAI's error shape; {@link OpenAIEndpoints.completions} and {@link OpenAIEndpoints.chat}
 * answer the generation endpoints with the generator a server picks for each request.
 *
 * What every server gets from here: the request schemas (vLLM's token-id options, `n` capped at
 * 128), 400s naming the parameter at fault, 413 past the body limit, prompts that encode to no
 * tokens refused, chats rendered with `tools` and `chat_template_kwargs`, stop strings cut
 * unless `include_stop_str_in_output`, `return_token_ids` and `return_tokens_as_token_ids`,
 * streams ending in `data: [DONE]`, and failures answered as {@link openAIErrorOf} says (context
 * length, bad token ids and malformed URL segments are 400s).
 */
export class OpenAIEndpoints {
  private readonly schemas: ReturnType<typeof openAIRequestSchemas>;

  /** @param options the server's name, body limit and log. */
  constructor(private readonly options: OpenAIEndpointsOptions) {
    this.schemas = openAIRequestSchemas(options.server);
  }

  /**
   * Runs `run` for a request to `path`, which accepts `method` only (or one of a list; others get
   * 405 with an `Allow` header), answering whatever it throws with `sendError` (default: OpenAI's
   * error shape; Anthropic's routes give theirs); 500s are logged.
   */
  async answer(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    method: string | readonly string[],
    run: () => Promise<void>,
    sendError: ErrorWriter = sendOpenAIError,
  ): Promise<void> {
    const methods = typeof method === "string" ? [method] : method;
    try {
      if (!methods.includes(req.method ?? ""))
        throw new ProtocolError(`${path} accepts ${methods.join(" or ")} requests, not ${req.method ?? "?"}`, {
          status: 405,
          code: "method_not_allowed",
          openaiType: "invalid_request_error",
        });
      await run();
    } catch (error) {
      if (clientGone(req, res)) return;
      const api = openAIErrorOf(error);
      if (api.status === 500)
        this.options.log(
          `${req.method ?? "?"} ${path} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
      sendError(res, api, api.status === 405 ? { allow: methods.join(", ") } : {});
    }
  }

  /**
   * Answers `POST /v1/completions`: `prompt` as text (encoded with BOS unless
   * `add_special_tokens` is false), token ids, or a list of either, each prompt's choices
   * sampled in turn. `generatorFor` sees the parsed request first and may refuse it.
   */
  async completions(
    req: IncomingMessage,
    res: ServerResponse,
    generatorFor: GeneratorFor<CompletionRequest>,
  ): Promise<void> {
    const { request, generator } = await this.accept(req, this.schemas.completion, generatorFor);
    const { prompt } = request;
    const texts: Array<string | number[]> =
      typeof prompt === "string" || typeof prompt[0] === "number"
        ? [prompt as string | number[]]
        : (prompt as Array<string | number[]>);
    const prompts = texts.map((p) =>
      typeof p === "string" ? generator.tokenizer.encode(p, { addBos: request.add_special_tokens ?? true }) : p,
    );
    // The work of one request is capped, not just its `n`: a list of prompts multiplies it.
    const sequences = prompts.length * (request.n ?? 1);
    if (sequences > MAX_SAMPLES_PER_REQUEST)
      throw new ProtocolError(
        `this request asks for ${prompts.length} prompts × n ${request.n ?? 1} = ${sequences} sequences; ${this.options.server} samples at most ${MAX_SAMPLES_PER_REQUEST} per request: send several requests`,
        { status: 400, code: "too_many_samples", openaiType: "invalid_request_error", param: "prompt" },
      );
    prompts.forEach((p, i) => {
      if (p.length === 0)
        throw new ProtocolError(
          `prompt${texts.length > 1 ? `[${i}]` : ""} encodes to no tokens; give a non-empty prompt`,
          { status: 400, openaiType: "invalid_request_error", param: "prompt" },
        );
    });
    const generations: Generation[] = [];
    for (const [i, p] of prompts.entries()) {
      // A turn of the event loop between prompts keeps the server answering while a long list is sampled.
      if (i > 0) await nextTurn();
      generations.push(await generator.generate(p, request, { maxTokens: request.max_tokens ?? undefined }));
    }
    const format = responseFormat(request, `cmpl-${randomUUID()}`, generator.tokenizer);
    const promptTokens = generations.map((g) => g.promptTokens);
    const choices = generations.map((g) => g.choices);
    if (request.stream) sendOpenAIEvents(res, completionEvents(format, promptTokens, choices));
    else sendJson(res, 200, completionBody(format, promptTokens, choices));
  }

  /**
   * Answers `POST /v1/chat/completions`: `messages` rendered with the generator's chat template
   * (with `tools` and `chat_template_kwargs`). `generatorFor` sees the parsed request first and
   * may refuse it.
   */
  async chat(req: IncomingMessage, res: ServerResponse, generatorFor: GeneratorFor<ChatRequest>): Promise<void> {
    const { request, generator } = await this.accept(req, this.schemas.chat, generatorFor);
    const tools = requestTools(request);
    const { choices, promptTokens } = await this.generateChat(generator, {
      request,
      messages: requestMessages(request),
      ...(tools && { tools }),
      parseTools: (tools?.length ?? 0) > 0 && request.tool_choice !== "none",
      maxTokens: request.max_completion_tokens ?? request.max_tokens ?? undefined,
      addGenerationPrompt: request.add_generation_prompt ?? true,
      ...(request.chat_template_kwargs && { chatTemplateKwargs: request.chat_template_kwargs }),
    });
    const format = responseFormat(request, `chatcmpl-${randomUUID()}`, generator.tokenizer);
    if (request.stream) sendOpenAIEvents(res, chatCompletionEvents(format, promptTokens, choices));
    else sendJson(res, 200, chatCompletionBody(format, promptTokens, choices));
  }

  /**
   * Renders a conversation with the generator's chat template and samples its choices: the one
   * path every chat dialect (chat completions, and the others that translate to it) goes through.
   * Each choice comes back parsed by the generator's chat parser (default: the format of its
   * tokenizer's chat template): `text` the content, `toolCalls` and `reasoning` split out of it.
   */
  async generateChat(generator: OpenAIGenerator, call: ChatCall): Promise<Generation> {
    return generator.generate(this.chatPrompt(generator, call), call.request, {
      maxTokens: call.maxTokens,
      chat: {
        messages: call.messages,
        parseTools: call.parseTools,
        ...(call.tools && { tools: call.tools }),
        parser: generator.chatParser ?? templateChatParser(generator.tokenizer),
        ...(call.dialect && { dialect: call.dialect }),
        ...(call.newToolCallId && { newToolCallId: call.newToolCallId }),
      },
    });
  }

  /** The prompt token ids of a conversation, rendered as {@link OpenAIEndpoints.generateChat} samples it. */
  chatPrompt(generator: OpenAIGenerator, call: Omit<ChatCall, "request" | "parseTools" | "maxTokens">): number[] {
    const templateOptions: ChatTemplateOptions = {
      addGenerationPrompt: call.addGenerationPrompt ?? true,
      ...(call.tools && { tools: call.tools }),
      ...(call.chatTemplateKwargs && { chatTemplateKwargs: call.chatTemplateKwargs }),
    };
    return (
      generator.renderChat?.(call.messages, templateOptions) ??
      generator.tokenizer.applyChatTemplate(call.messages, templateOptions)
    );
  }

  /** Reads and checks a generation request, and picks its generator. */
  private async accept<R>(
    req: IncomingMessage,
    schema: z.ZodType<R>,
    generatorFor: GeneratorFor<R>,
  ): Promise<{ request: R; generator: OpenAIGenerator }> {
    const request = parseOpenAIRequest(schema, await this.readBody(req));
    return { request, generator: await generatorFor(request) };
  }

  /**
   * Reads and parses a JSON request body.
   * @throws {@link ProtocolError} 413 past the body limit, 400 for invalid JSON.
   */
  readBody(req: IncomingMessage): Promise<unknown> {
    return readOpenAIBody(req, this.options.maxBodyBytes);
  }
}
