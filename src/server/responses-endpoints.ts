/**
 * {@link ResponsesEndpoints}: the OpenAI Responses API (`POST /v1/responses`, `GET` and `DELETE
 * /v1/responses/{id}`) for both servers that speak OpenAI's API, translated to the one chat path
 * of {@link OpenAIEndpoints.generateChat}.
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ChatMessage } from "../wire/tokenizer.js";
import type { GeneratorFor, OpenAIEndpoints } from "./openai-endpoints.js";
import {
  chatLogprobs,
  parseOpenAIRequest,
  responseFormat,
  textPieces,
  type GenerationRequest,
} from "./openai-protocol.js";
import {
  answerMessage,
  inputMessages,
  responseEvents,
  responseObject,
  responseOutput,
  responsesId,
  responsesRequestSchema,
  responsesSampling,
  responsesTools,
  responseUsage,
  sendResponseEvents,
  wantsLogprobs,
  type ResolvedItem,
} from "./responses-protocol.js";
import type { ResponseStore } from "./responses-store.js";
import { sendJson } from "./io.js";
import { decodePathSegment } from "./url-path.js";
import { ProtocolError } from "../errors.js";

/** A route of the Responses API: the methods it accepts and what answers it, given the store and the generator to use. */
export interface ResponsesRoute {
  /** The accepted methods. */
  method: string | readonly string[];
  /** Answers the request with `store` (where responses are kept) and `generatorFor` (which samples). */
  run(store: ResponseStore, generatorFor: GeneratorFor<GenerationRequest>): Promise<void>;
}

const notStored = (id: string, param: string | null, code: string) =>
  new ProtocolError(
    `no stored response${code === "item_not_found" ? " item" : ""} \`${id}\`: a server keeps the last responses created with store (the default) only, and the agent gateway only those of the same rollout`,
    { status: 404, code, openaiType: "invalid_request_error", param },
  );

/**
 * The Responses API of one server. `POST /v1/responses` takes `input` (text, or items: messages
 * with text parts, `function_call`, `function_call_output`, `reasoning`, `item_reference`),
 * `instructions`, function `tools`, `tool_choice` (`auto`, `none`), `max_output_tokens`,
 * `temperature`, `top_p`, `previous_response_id`, `store` (default true), `metadata`,
 * `include: ["message.output_text.logprobs"]` with `top_logprobs`, and `stream`; what the schema of `responses-protocol.ts` does not support is refused with a 400
 * naming the parameter. The request becomes one chat (instructions as a system message first,
 * then the previous response's conversation, then the input) sampled by
 * {@link OpenAIEndpoints.generateChat}; the answer is output items (reasoning, message,
 * function calls), streamed as OpenAI's server-sent events when asked.
 */
export class ResponsesEndpoints {
  private readonly schema: ReturnType<typeof responsesRequestSchema>;

  /**
   * @param endpoints the server's OpenAI endpoints (body limit, chat path).
   * @param server names the server in messages about unsupported options.
   */
  constructor(
    private readonly endpoints: OpenAIEndpoints,
    server: string,
  ) {
    this.schema = responsesRequestSchema(server);
  }

  /** The route of `path` (`/v1/responses` or `/v1/responses/{id}`), or undefined for another path. */
  route(path: string, req: IncomingMessage, res: ServerResponse): ResponsesRoute | undefined {
    if (path === "/v1/responses")
      return { method: "POST", run: (store, generatorFor) => this.create(req, res, store, generatorFor) };
    const segment = /^\/v1\/responses\/([^/]+)$/.exec(path)?.[1];
    if (segment === undefined) return undefined;
    return {
      method: ["GET", "DELETE"],
      run: async (store) => {
        const id = decodePathSegment(segment, "response id");
        if (req.method === "DELETE") {
          if (!store.delete(id)) throw notStored(id, null, "not_found");
          sendJson(res, 200, { id, object: "response.deleted", deleted: true });
          return;
        }
        if (new URL(req.url ?? "/", "http://x").searchParams.get("stream") === "true")
          throw new ProtocolError("stream: a stored response is answered whole; leave stream out", {
            status: 400,
            openaiType: "invalid_request_error",
            param: "stream",
          });
        const stored = store.get(id);
        if (!stored) throw notStored(id, null, "not_found");
        sendJson(res, 200, stored.response);
      },
    };
  }

  /** Answers `POST /v1/responses`, keeping the response in `store` unless `store: false`. */
  private async create(
    req: IncomingMessage,
    res: ServerResponse,
    store: ResponseStore,
    generatorFor: GeneratorFor<GenerationRequest>,
  ): Promise<void> {
    const request = parseOpenAIRequest(this.schema, await this.endpoints.readBody(req));
    const previousId = request.previous_response_id;
    const previous = previousId == null ? [] : this.previousConversation(store, previousId);
    const resolve = (id: string, param: string): ResolvedItem => {
      const item = store.item(id);
      if (!item) throw notStored(id, param, "item_not_found");
      return item;
    };
    const conversation = [...previous, ...inputMessages(request.input, resolve)];
    if (conversation.length === 0)
      throw new ProtocolError("input: give the input (text, or a list of items)", {
        status: 400,
        openaiType: "invalid_request_error",
        param: "input",
      });
    const messages: ChatMessage[] =
      request.instructions != null
        ? [{ role: "system", content: request.instructions }, ...conversation]
        : conversation;
    const sampling = responsesSampling(request);
    const generator = await generatorFor(sampling);
    const tools = responsesTools(request);
    const createdAt = Math.floor(Date.now() / 1000);
    const { choices, promptTokens } = await this.endpoints.generateChat(generator, {
      request: sampling,
      messages,
      ...(tools && { tools }),
      parseTools: (tools?.length ?? 0) > 0 && request.tool_choice !== "none",
      maxTokens: request.max_output_tokens ?? undefined,
      dialect: "responses",
    });
    const choice = choices[0]!;
    const id = responsesId("resp");
    const logprobs = wantsLogprobs(request)
      ? chatLogprobs(
          responseFormat(
            { ...sampling, logprobs: true, top_logprobs: request.top_logprobs ?? 0 },
            id,
            generator.tokenizer,
          ),
          choice.tokens,
          choice.logprobs,
        ).content
      : undefined;
    const response = responseObject(
      request,
      id,
      createdAt,
      responseOutput(choice, logprobs),
      responseUsage(generator.tokenizer, promptTokens.length, choice),
    );
    if (request.store ?? true) store.put({ response, conversation: [...conversation, answerMessage(choice)] });
    if (request.stream) sendResponseEvents(res, responseEvents(response, textPieces(generator.tokenizer, choice)));
    else sendJson(res, 200, response);
  }

  private previousConversation(store: ResponseStore, id: string): ChatMessage[] {
    const stored = store.get(id);
    if (!stored) throw notStored(id, "previous_response_id", "previous_response_not_found");
    return stored.conversation;
  }
}
