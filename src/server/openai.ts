/**
 * The OpenAI-compatible endpoints of `nexrl serve`: `GET /v1/models`, `POST /v1/completions`,
 * `POST /v1/chat/completions` and the Responses API `POST /v1/responses` (each with streaming), over any {@link SamplingClient}, with vLLM's
 * token-id extensions so that RL clients get the exact ids the model read and sampled.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SamplingClient } from "../contracts/training.js";
import type { SamplingParams } from "../wire/results.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import { modelInputFromTokens } from "../wire/wire.js";
import {
  decodedChoice,
  endpointPath,
  modelEntry,
  modelList,
  OpenAIEndpoints,
  requestSampling,
  type OpenAIGenerator,
} from "./openai-endpoints.js";
import { ResponsesEndpoints } from "./responses-endpoints.js";
import { ResponseStore, STORED_RESPONSES } from "./responses-store.js";
import { AnthropicMessages } from "./anthropic-endpoints.js";
import { sendAnthropicError } from "./anthropic-protocol.js";
import { sendJson } from "./io.js";
import { decodePathSegment } from "./url-path.js";
import { ProtocolError } from "../errors.js";

/** A model the endpoints serve: its sampler and its tokenizer. */
export interface ServedModel {
  /** Samples and scores with the model's weights. */
  samplingClient: SamplingClient;
  /** Encodes prompts, renders chats and decodes samples. */
  tokenizer: Tokenizer;
}

/** Options of {@link createOpenAIHandler}. */
export interface OpenAIHandlerOptions {
  /** Models served under fixed names; `GET /v1/models` lists them. */
  models?: Readonly<Record<string, ServedModel>>;
  /** Resolves other model names (such as sampler paths) to a model, or undefined for an unknown name (404). */
  resolveModel?: (name: string) => ServedModel | undefined | Promise<ServedModel | undefined>;
  /** `max_tokens` of chat requests that give none (default 1024; completions default to 16 as in OpenAI's API). */
  defaultChatMaxTokens?: number;
  /** Largest request body in bytes (default 16 MiB). */
  maxBodyBytes?: number;
  /** Responses kept for `previous_response_id` and `GET /v1/responses/{id}`, the most recently used (default 1000). */
  storedResponses?: number;
  /** Where failures of the model (500 answers) are reported (default: standard error). */
  log?: (line: string) => void;
}

/** Answers a request and resolves true, or resolves false when the route is not one of these endpoints. */
export type OpenAIRequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/**
 * The generator of `model`: `request.n` samples of a prompt, each decoded and cut at its stop
 * string. Requests without `max_tokens` get 16 tokens (completions, as OpenAI's API) or
 * `chatMaxTokens` (chats).
 */
function modelGenerator(model: ServedModel, chatMaxTokens: number): OpenAIGenerator {
  return {
    tokenizer: model.tokenizer,
    async generate(prompt, request, call) {
      const params: SamplingParams = requestSampling(request, call.maxTokens ?? (call.chat ? chatMaxTokens : 16));
      // A chat's turn may end with a token besides EOS (Harmony's <|call|>): sampling stops there too.
      const turnEnds = call.chat ? model.tokenizer.turnEndIds : undefined;
      if (turnEnds) params.stop = [...(params.stop ?? []), ...turnEnds];
      const future = await model.samplingClient.sample(modelInputFromTokens(prompt), request.n ?? 1, params);
      const { sequences } = await future.result();
      return {
        promptTokens: prompt,
        choices: sequences.map((s) =>
          decodedChoice(model.tokenizer, s.tokens, s.logprobs, s.stopReason, request, call.chat),
        ),
      };
    },
  };
}

/**
 * The request handler of the OpenAI-compatible endpoints, to mount on a `node:http` server:
 *
 * - `GET /v1/models`, `GET /v1/models/{name}`: the models of `options.models`.
 * - `POST /v1/completions`: `prompt` as text (encoded with BOS unless `add_special_tokens` is
 *   false), token ids, or a list of either; `n`, `max_tokens` (default 16), `temperature`,
 *   `top_p`, `top_k`, `seed`, `stop`, `logprobs`, `stream`.
 * - `POST /v1/chat/completions`: `messages` rendered with the tokenizer's chat template (with
 *   `tools` and `chat_template_kwargs`); `n`, `max_tokens`/`max_completion_tokens`, sampling
 *   fields, `stop`, `logprobs`/`top_logprobs`, `stream` (SSE chunks ending in `data: [DONE]`,
 *   with `stream_options.include_usage`).
 * - `POST /v1/responses` (OpenAI's Responses API): `input` as text or items (messages with
 *   `input_text`/`output_text` parts, `function_call`, `function_call_output`, `reasoning`,
 *   `item_reference`), `instructions`, function `tools`, `tool_choice` `auto`/`none`,
 *   `max_output_tokens`, `temperature`, `top_p`, `previous_response_id`, `store` (default true),
 *   `metadata`, `include: ["message.output_text.logprobs"]` with `top_logprobs`, `stream` (OpenAI's server-sent events, `response.created` … `response.completed`,
 *   with `sequence_number`); built-in tools, background mode, non-text parts, structured
 *   outputs and the other options it cannot honour are refused with a 400 naming the parameter.
 * - `GET`/`DELETE /v1/responses/{id}`: a stored response (the last `storedResponses`, 1000 by default).
 *
 * vLLM's `return_token_ids` adds `prompt_token_ids` and each choice's `token_ids` (in streams:
 * each chunk's ids, the prompt's in the first chunk), `return_tokens_as_token_ids` writes logprob
 * tokens as `token_id:<n>`, and `include_stop_str_in_output` keeps a matched stop string in the
 * text (token ids always include the tokens that completed it, as sampled). Logprobs are those of
 * the sampled tokens; `top_logprobs` entries hold the sampled token only, since a
 * {@link SamplingClient} reports no alternatives, and more than one (`top_logprobs` or
 * `logprobs` above 1) is refused with a 400. Chat answers are parsed in the format the
 * model's chat template writes (or `toolParser`'s): tool calls into `tool_calls` (finish reason
 * `tool_calls`), reasoning into `reasoning_content`; a malformed call stays in the content.
 *
 * - `POST /v1/messages`, `POST /v1/messages/count_tokens`: Anthropic's Messages API (the
 *   `@anthropic-ai/sdk` client, `x-api-key` and `anthropic-version` headers), translated to the
 *   chat path above: `system`, text / tool_use / tool_result / thinking blocks, `tools`,
 *   `max_tokens`, `stop_sequences`, `temperature`, `top_p`, `top_k`, `thinking`, `stream`
 *   (`message_start` … `message_stop` events); what it cannot do (images, server tools, …) is
 *   refused with a 400. Its errors have Anthropic's shape `{ type: "error", error: { type, message } }`.
 *
 * Malformed requests get 400, unknown models 404, other methods 405, each with an OpenAI error
 * body `{ error: { message, type, param, code } }`; a failing sampler gets 500.
 */
export function createOpenAIHandler(options: OpenAIHandlerOptions): OpenAIRequestHandler {
  const models = options.models ?? {};
  const created = Math.floor(Date.now() / 1000);
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const endpoints = new OpenAIEndpoints({
    server: "nexrl serve",
    maxBodyBytes: options.maxBodyBytes ?? 16 * 1024 * 1024,
    log: (line) => log(`nexrl serve: ${line}`),
  });
  const chatMaxTokens = options.defaultChatMaxTokens ?? 1024;
  const responses = new ResponsesEndpoints(endpoints, "nexrl serve");
  const store = new ResponseStore(options.storedResponses ?? STORED_RESPONSES);
  const messages = new AnthropicMessages(endpoints, "nexrl serve");

  const modelNotFound = (name: string, served: string) =>
    new ProtocolError(`The model \`${name}\` does not exist.${served}`, {
      status: 404,
      code: "model_not_found",
      openaiType: "invalid_request_error",
      param: "model",
    });

  const generatorFor = async ({ model: name }: { model: string }): Promise<OpenAIGenerator> => {
    const model = Object.hasOwn(models, name) ? models[name] : await options.resolveModel?.(name);
    if (!model) throw modelNotFound(name, ` Served models: ${Object.keys(models).join(", ") || "none listed"}.`);
    return modelGenerator(model, chatMaxTokens);
  };

  /** The method and answer of the route at `path`, or undefined when it is not one of these endpoints. */
  const route = (path: string, req: IncomingMessage, res: ServerResponse) => {
    const responsesRoute = responses.route(path, req, res);
    if (responsesRoute) return { method: responsesRoute.method, run: () => responsesRoute.run(store, generatorFor) };
    const named = /^\/v1\/models\/(.+)$/.exec(path)?.[1];
    if (named !== undefined)
      return {
        method: "GET",
        run: async () => {
          const name = decodePathSegment(named, "model name");
          if (!Object.hasOwn(models, name)) throw modelNotFound(name, "");
          sendJson(res, 200, modelEntry(name, created));
        },
      };
    switch (path) {
      case "/v1/models":
        return {
          method: "GET",
          run: async () => sendJson(res, 200, modelList(Object.keys(models), created)),
        };
      case "/v1/completions":
        return { method: "POST", run: () => endpoints.completions(req, res, generatorFor) };
      case "/v1/chat/completions":
        return { method: "POST", run: () => endpoints.chat(req, res, generatorFor) };
      case "/v1/messages":
        return { method: "POST", run: () => messages.create(req, res, generatorFor), sendError: sendAnthropicError };
      case "/v1/messages/count_tokens":
        return {
          method: "POST",
          run: () => messages.countTokens(req, res, generatorFor),
          sendError: sendAnthropicError,
        };
      default:
        return undefined;
    }
  };

  return async (req, res) => {
    const path = endpointPath(req);
    const found = route(path, req, res);
    if (!found) return false;
    await endpoints.answer(req, res, path, found.method, found.run, found.sendError);
    return true;
  };
}
