/**
 * The OpenAI-compatible endpoints of `nexrl serve`: `GET /v1/models`, `POST /v1/completions` and
 * `POST /v1/chat/completions` (with streaming), over any {@link SamplingClient}, with vLLM's
 * token-id extensions so that RL clients get the exact ids the model read and sampled.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SamplingClient, SamplingParams } from "../services/training/types.js";
import type { Tokenizer } from "../types/tokenizer.js";
import { modelInputFromTokens } from "../types/wire.js";
import {
  chatCompletionBody,
  chatCompletionEvents,
  completionBody,
  completionEvents,
  cutAtStop,
  OpenAIApiError,
  openAIErrorOf,
  openAIRequestSchemas,
  parseOpenAIRequest,
  readOpenAIBody,
  requestMessages,
  requestTools,
  responseFormat,
  sendOpenAIError,
  sendOpenAIEvents,
  sendOpenAIJson,
  stopStrings,
  type GeneratedChoice,
  type GenerationRequest,
} from "./openai-protocol.js";
import { decodePathSegment } from "./url-path.js";

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
  /** Where failures of the model (500 answers) are reported (default: standard error). */
  log?: (line: string) => void;
}

/** Answers a request and resolves true, or resolves false when the route is not one of these endpoints. */
export type OpenAIRequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

const { completion: completionRequest, chat: chatRequest } = openAIRequestSchemas("nexrl serve");

/** Samples `request.n` choices of `prompt` and decodes them, cut at a stop string unless it is to be kept. */
async function generate(
  model: ServedModel,
  prompt: number[],
  request: GenerationRequest,
  maxTokens: number,
): Promise<GeneratedChoice[]> {
  const stops = stopStrings(request.stop);
  const params: SamplingParams = {
    maxTokens,
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { topP: request.top_p }),
    ...(request.top_k != null && { topK: request.top_k }),
    ...(request.seed != null && { seed: request.seed }),
    ...(stops.length > 0 && { stop: stops }),
  };
  const { sequences } = await (
    await model.samplingClient.sample(modelInputFromTokens(prompt), request.n ?? 1, params)
  ).result();
  return sequences.map((sequence) => ({
    tokens: sequence.tokens,
    logprobs: sequence.logprobs,
    finishReason: sequence.stopReason,
    ...cutAtStop(
      model.tokenizer,
      sequence.tokens,
      sequence.stopReason,
      stops,
      request.include_stop_str_in_output ?? false,
    ),
  }));
}

// ---------------------------------------------------------------------------------------------
// Endpoints

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
 *
 * vLLM's `return_token_ids` adds `prompt_token_ids` and each choice's `token_ids` (in streams:
 * each chunk's ids, the prompt's in the first chunk), `return_tokens_as_token_ids` writes logprob
 * tokens as `token_id:<n>`, and `include_stop_str_in_output` keeps a matched stop string in the
 * text (token ids always include the tokens that completed it, as sampled). Logprobs are those of
 * the sampled tokens; `top_logprobs` entries hold the sampled token only, since a
 * {@link SamplingClient} reports no alternatives. Tool calls are not parsed out of answers.
 *
 * Malformed requests get 400, unknown models 404, other methods 405, each with an OpenAI error
 * body `{ error: { message, type, param, code } }`; a failing sampler gets 500.
 */
export function createOpenAIHandler(options: OpenAIHandlerOptions): OpenAIRequestHandler {
  const models = options.models ?? {};
  const created = Math.floor(Date.now() / 1000);
  const maxBodyBytes = options.maxBodyBytes ?? 16 * 1024 * 1024;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const modelEntry = (id: string) => ({ id, object: "model", created, owned_by: "nexrl" });

  const resolve = async (name: string): Promise<ServedModel> => {
    const model = Object.hasOwn(models, name) ? models[name] : await options.resolveModel?.(name);
    if (!model)
      throw new OpenAIApiError(
        404,
        `The model \`${name}\` does not exist. Served models: ${Object.keys(models).join(", ") || "none listed"}.`,
        "invalid_request_error",
        "model",
        "model_not_found",
      );
    return model;
  };

  const completions = async (body: unknown, res: ServerResponse): Promise<void> => {
    const request = parseOpenAIRequest(completionRequest, body);
    const model = await resolve(request.model);
    const { prompt } = request;
    const texts: Array<string | number[]> =
      typeof prompt === "string" || typeof prompt[0] === "number"
        ? [prompt as string | number[]]
        : (prompt as Array<string | number[]>);
    const prompts = texts.map((p) =>
      typeof p === "string" ? model.tokenizer.encode(p, { addBos: request.add_special_tokens ?? true }) : p,
    );
    prompts.forEach((p, i) => {
      if (p.length === 0)
        throw new OpenAIApiError(
          400,
          `prompt${texts.length > 1 ? `[${i}]` : ""} encodes to no tokens; give a non-empty prompt`,
          "invalid_request_error",
          "prompt",
        );
    });
    const results: GeneratedChoice[][] = [];
    for (const [i, p] of prompts.entries()) {
      // A turn of the event loop between prompts keeps the server answering while a long list is sampled.
      if (i > 0) await nextTurn();
      results.push(await generate(model, p, request, request.max_tokens ?? 16));
    }
    const format = responseFormat(request, `cmpl-${randomUUID()}`, model.tokenizer);
    if (request.stream) sendOpenAIEvents(res, completionEvents(format, prompts, results));
    else sendOpenAIJson(res, 200, completionBody(format, prompts, results));
  };

  const chat = async (body: unknown, res: ServerResponse): Promise<void> => {
    const request = parseOpenAIRequest(chatRequest, body);
    const model = await resolve(request.model);
    const tools = requestTools(request);
    const prompt = model.tokenizer.applyChatTemplate(requestMessages(request), {
      addGenerationPrompt: request.add_generation_prompt ?? true,
      ...(tools && { tools }),
      ...(request.chat_template_kwargs && { chatTemplateKwargs: request.chat_template_kwargs }),
    });
    const choices = await generate(
      model,
      prompt,
      request,
      request.max_completion_tokens ?? request.max_tokens ?? options.defaultChatMaxTokens ?? 1024,
    );
    const format = responseFormat(request, `chatcmpl-${randomUUID()}`, model.tokenizer);
    if (request.stream) sendOpenAIEvents(res, chatCompletionEvents(format, prompt, choices));
    else sendOpenAIJson(res, 200, chatCompletionBody(format, prompt, choices));
  };

  const routes: Record<string, { method: string; run: (req: IncomingMessage, res: ServerResponse) => Promise<void> }> =
    {
      "/v1/models": {
        method: "GET",
        run: async (_req, res) =>
          sendOpenAIJson(res, 200, { object: "list", data: Object.keys(models).map(modelEntry) }),
      },
      "/v1/completions": {
        method: "POST",
        run: async (req, res) => completions(await readOpenAIBody(req, maxBodyBytes), res),
      },
      "/v1/chat/completions": {
        method: "POST",
        run: async (req, res) => chat(await readOpenAIBody(req, maxBodyBytes), res),
      },
    };

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
    const modelName = /^\/v1\/models\/(.+)$/.exec(path)?.[1];
    const route =
      modelName !== undefined
        ? {
            method: "GET",
            run: async (_req: IncomingMessage, res: ServerResponse) => {
              const name = decodePathSegment(modelName, "model name");
              if (!Object.hasOwn(models, name))
                throw new OpenAIApiError(
                  404,
                  `The model \`${name}\` does not exist.`,
                  "invalid_request_error",
                  "model",
                  "model_not_found",
                );
              sendOpenAIJson(res, 200, modelEntry(name));
            },
          }
        : routes[path];
    if (!route) return false;
    try {
      if (req.method !== route.method)
        throw new OpenAIApiError(
          405,
          `${path} accepts ${route.method} requests, not ${req.method ?? "?"}`,
          "invalid_request_error",
          null,
          "method_not_allowed",
        );
      await route.run(req, res);
    } catch (error) {
      const api = openAIErrorOf(error);
      if (api.status >= 500)
        log(
          `nexrl serve: ${req.method ?? "?"} ${path} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
      sendOpenAIError(res, api, api.status === 405 ? { allow: route.method } : {});
    }
    return true;
  };
}
