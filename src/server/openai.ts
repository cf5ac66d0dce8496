/**
 * The OpenAI-compatible endpoints of `nexrl serve`: `GET /v1/models`, `POST /v1/completions` and
 * `POST /v1/chat/completions` (with streaming), over any {@link SamplingClient}, with vLLM's
 * token-id extensions so that RL clients get the exact ids the model read and sampled.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { ContextLengthError, SamplingParamsError, TokenIdError } from "../engine/errors.js";
import { tokenIdString } from "../services/inference/openai/vllm.js";
import { ChatTemplateError } from "../services/inference/tokenizers/errors.js";
import type { SampledSequence, SamplingClient, SamplingParams } from "../services/training/types.js";
import type { ChatMessage, Tokenizer } from "../types/tokenizer.js";
import { modelInputFromTokens } from "../types/wire.js";

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

/** An error answered as OpenAI does: `{ error: { message, type, param, code } }`. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Requests

const tokenIds = z.array(z.int().min(0)).min(1);
const nullish = <T extends z.ZodType>(schema: T) => schema.nullish();

/** Fields both generation endpoints take (vLLM's token-id options included). */
const generationFields = {
  model: z.string().min(1),
  n: nullish(z.int().min(1).max(128)),
  max_tokens: nullish(z.int().min(1)),
  temperature: nullish(z.number().min(0)),
  top_p: nullish(z.number().gt(0).max(1)),
  top_k: nullish(z.int().min(-1)),
  seed: nullish(z.int()),
  stop: nullish(z.union([z.string().min(1), z.array(z.string().min(1)).max(16)])),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.object({ include_usage: nullish(z.boolean()) })),
  return_token_ids: nullish(z.boolean()),
  return_tokens_as_token_ids: nullish(z.boolean()),
  include_stop_str_in_output: nullish(z.boolean()),
  // Accepted only at their neutral values: this server does not implement them.
  echo: nullish(z.literal(false, { error: "echo is not supported by nexrl serve; leave it false" })),
  frequency_penalty: nullish(z.literal(0, { error: "frequency_penalty is not supported by nexrl serve; leave it 0" })),
  presence_penalty: nullish(z.literal(0, { error: "presence_penalty is not supported by nexrl serve; leave it 0" })),
  repetition_penalty: nullish(z.literal(1, { error: "repetition_penalty is not supported by nexrl serve; leave it 1" })),
  logit_bias: nullish(z.record(z.string(), z.number()).refine((bias) => Object.keys(bias).length === 0, "logit_bias is not supported by nexrl serve; leave it empty")),
};

const completionRequest = z.object({
  ...generationFields,
  prompt: z.union([z.string(), tokenIds, z.array(z.string()).min(1), z.array(tokenIds).min(1)]),
  logprobs: nullish(z.int().min(0).max(20)),
  add_special_tokens: nullish(z.boolean()),
});

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const chatMessage = z.object({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
  name: nullish(z.string()),
  tool_call_id: nullish(z.string()),
  tool_calls: nullish(z.array(z.object({ id: z.string(), type: z.literal("function"), function: z.object({ name: z.string(), arguments: z.string() }) }))),
});

const chatRequest = z.object({
  ...generationFields,
  messages: z.array(chatMessage).min(1),
  max_completion_tokens: nullish(z.int().min(1)),
  logprobs: nullish(z.boolean()),
  top_logprobs: nullish(z.int().min(0).max(20)),
  tools: nullish(z.array(z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }) }))),
  chat_template_kwargs: nullish(z.record(z.string(), z.unknown())),
  add_generation_prompt: nullish(z.boolean()),
});

type GenerationRequest = z.infer<z.ZodObject<typeof generationFields>>;

function parseRequest<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "") || null;
  throw new ApiError(400, param ? `${param}: ${issue.message}` : issue.message, "invalid_request_error", param);
}

async function readBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new ApiError(413, `the request body exceeds ${maxBytes} bytes; send a shorter prompt`, "invalid_request_error", null, "request_too_large");
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch (error) {
    throw new ApiError(400, `the request body is not valid JSON: ${(error as Error).message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Generation

/** One generated choice, decoded, with the text cut at a stop string unless it is to be kept. */
interface Choice {
  tokens: number[];
  logprobs: number[];
  text: string;
  finishReason: SampledSequence["stopReason"];
  /** The stop string that ended it (vLLM's `stop_reason`); null for EOS or length. */
  stopReason: string | null;
}

function stopStrings(stop: GenerationRequest["stop"]): string[] {
  return stop == null ? [] : typeof stop === "string" ? [stop] : stop;
}

async function generate(model: ServedModel, prompt: number[], request: GenerationRequest, maxTokens: number): Promise<Choice[]> {
  const stops = stopStrings(request.stop);
  const params: SamplingParams = {
    maxTokens,
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { topP: request.top_p }),
    ...(request.top_k != null && { topK: request.top_k }),
    ...(request.seed != null && { seed: request.seed }),
    ...(stops.length > 0 && { stop: stops }),
  };
  const { sequences } = await (await model.samplingClient.sample(modelInputFromTokens(prompt), request.n ?? 1, params)).result();
  return sequences.map((sequence) => {
    const text = model.tokenizer.decode(sequence.tokens);
    const hit = sequence.stopReason === "stop" ? stops.map((s) => ({ s, at: text.indexOf(s) })).filter((h) => h.at >= 0).sort((a, b) => a.at - b.at)[0] : undefined;
    return {
      tokens: sequence.tokens,
      logprobs: sequence.logprobs,
      text: hit && !request.include_stop_str_in_output ? text.slice(0, hit.at) : text,
      finishReason: sequence.stopReason,
      stopReason: hit?.s ?? null,
    };
  });
}

/** The text each token adds to a streamed choice; together they spell `choice.text` exactly. */
function textPieces(tokenizer: Tokenizer, choice: Choice): string[] {
  let emitted = 0;
  return choice.tokens.map((_, i) => {
    const last = i === choice.tokens.length - 1;
    const prefix = last ? choice.text : tokenizer.decode(choice.tokens.slice(0, i + 1));
    // A prefix ending inside a character (U+FFFD) or past a cut stop string is held back.
    if (!choice.text.startsWith(prefix) || prefix.length < emitted) return "";
    const piece = prefix.slice(emitted);
    emitted = prefix.length;
    return piece;
  });
}

function tokenText(tokenizer: Tokenizer, id: number, asIds: boolean): string {
  return asIds ? tokenIdString(id) : tokenizer.decode([id]);
}

/** Legacy completions logprobs; `top_logprobs` holds the sampled token only (the sampler reports no alternatives). */
function completionLogprobs(tokenizer: Tokenizer, tokens: number[], logprobs: number[], asIds: boolean, offset = 0) {
  const strings = tokens.map((id) => tokenText(tokenizer, id, asIds));
  const textOffset: number[] = [];
  for (const s of strings) {
    textOffset.push(offset);
    offset += s.length;
  }
  return { tokens: strings, token_logprobs: logprobs, top_logprobs: strings.map((s, i) => ({ [s]: logprobs[i]! })), text_offset: textOffset };
}

/** Chat logprobs; `top_logprobs` holds the sampled token only when any are asked (the sampler reports no alternatives). */
function chatLogprobs(tokenizer: Tokenizer, tokens: number[], logprobs: number[], asIds: boolean, top: number) {
  return {
    content: tokens.map((id, i) => {
      const token = tokenText(tokenizer, id, asIds);
      const entry = { token, logprob: logprobs[i]!, bytes: [...Buffer.from(token, "utf8")] };
      return { ...entry, top_logprobs: top > 0 ? [entry] : [] };
    }),
    refusal: null,
  };
}

function usage(promptTokens: number, choices: readonly Choice[]) {
  const completion = choices.reduce((sum, c) => sum + c.tokens.length, 0);
  return { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
}

// ---------------------------------------------------------------------------------------------
// Answers

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** The answer to `error`: sampler and template errors about the request are 400s, other failures 500s. */
function apiErrorOf(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const clientFault = error instanceof SamplingParamsError || error instanceof ContextLengthError || error instanceof TokenIdError || error instanceof ChatTemplateError;
  if (clientFault) return new ApiError(400, error.message);
  return new ApiError(500, `the model failed: ${error instanceof Error ? error.message : String(error)}`, "server_error");
}

/** Answers `error` in OpenAI's error shape. */
function sendError(res: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, error.status, { error: { message: error.message, type: error.type, param: error.param, code: error.code } }, headers);
}

/** Writes server-sent events; ends with `data: [DONE]`. */
function sendEvents(res: ServerResponse, events: readonly unknown[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
  res.end("data: [DONE]\n\n");
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
    if (!model) throw new ApiError(404, `The model \`${name}\` does not exist. Served models: ${Object.keys(models).join(", ") || "none listed"}.`, "invalid_request_error", "model", "model_not_found");
    return model;
  };

  const completions = async (body: unknown, res: ServerResponse): Promise<void> => {
    const request = parseRequest(completionRequest, body);
    const model = await resolve(request.model);
    const { prompt } = request;
    const texts: Array<string | number[]> = typeof prompt === "string" || typeof prompt[0] === "number" ? [prompt as string | number[]] : (prompt as Array<string | number[]>);
    const prompts = texts.map((p) => (typeof p === "string" ? model.tokenizer.encode(p, { addBos: request.add_special_tokens ?? true }) : p));
    prompts.forEach((p, i) => {
      if (p.length === 0) throw new ApiError(400, `prompt${texts.length > 1 ? `[${i}]` : ""} encodes to no tokens; give a non-empty prompt`, "invalid_request_error", "prompt");
    });
    const results: Choice[][] = [];
    for (const p of prompts) results.push(await generate(model, p, request, request.max_tokens ?? 16));
    const id = `cmpl-${randomUUID()}`;
    const asIds = request.return_tokens_as_token_ids ?? false;
    const wantLogprobs = request.logprobs != null;
    const ids = request.return_token_ids ?? false;
    const base = { id, object: "text_completion", created: Math.floor(Date.now() / 1000), model: request.model };
    const promptCount = prompts.reduce((sum, p) => sum + p.length, 0);
    const all = results.flat();
    if (!request.stream) {
      const choices = results.flatMap((choicesOfPrompt, p) =>
        choicesOfPrompt.map((c, j) => ({
          index: p * choicesOfPrompt.length + j,
          text: c.text,
          logprobs: wantLogprobs ? completionLogprobs(model.tokenizer, c.tokens, c.logprobs, asIds) : null,
          finish_reason: c.finishReason,
          stop_reason: c.stopReason,
          ...(ids && { prompt_token_ids: prompts[p], token_ids: c.tokens }),
        })),
      );
      sendJson(res, 200, { ...base, choices, usage: usage(promptCount, all) });
      return;
    }
    const includeUsage = request.stream_options?.include_usage ?? false;
    const events: unknown[] = [];
    results.forEach((choicesOfPrompt, p) =>
      choicesOfPrompt.forEach((c, j) => {
        const index = p * choicesOfPrompt.length + j;
        let offset = 0;
        textPieces(model.tokenizer, c).forEach((text, t) => {
          const logprobs = wantLogprobs ? completionLogprobs(model.tokenizer, [c.tokens[t]!], [c.logprobs[t]!], asIds, offset) : null;
          offset += logprobs?.tokens[0]!.length ?? 0;
          const tokenIdFields = ids ? { token_ids: [c.tokens[t]!], ...(t === 0 && { prompt_token_ids: prompts[p] }) } : {};
          events.push({ ...base, choices: [{ index, text, logprobs, finish_reason: null, ...tokenIdFields }], ...(includeUsage && { usage: null }) });
        });
        events.push({ ...base, choices: [{ index, text: "", logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }], ...(includeUsage && { usage: null }) });
      }),
    );
    if (includeUsage) events.push({ ...base, choices: [], usage: usage(promptCount, all) });
    sendEvents(res, events);
  };

  const chat = async (body: unknown, res: ServerResponse): Promise<void> => {
    const request = parseRequest(chatRequest, body);
    const model = await resolve(request.model);
    const messages: ChatMessage[] = request.messages.map((m) => ({
      role: m.role,
      content: typeof m.content === "string" ? m.content : (m.content ?? []).map((part) => part.text).join(""),
      ...(m.tool_calls && { tool_calls: m.tool_calls }),
      ...(m.tool_call_id != null && { tool_call_id: m.tool_call_id }),
      ...(m.name != null && { name: m.name }),
    }));
    const prompt = model.tokenizer.applyChatTemplate(messages, {
      addGenerationPrompt: request.add_generation_prompt ?? true,
      ...(request.tools && { tools: request.tools.map((t) => ({ type: t.type, function: t.function })) }),
      ...(request.chat_template_kwargs && { chatTemplateKwargs: request.chat_template_kwargs }),
    });
    const choices = await generate(model, prompt, request, request.max_completion_tokens ?? request.max_tokens ?? options.defaultChatMaxTokens ?? 1024);
    const id = `chatcmpl-${randomUUID()}`;
    const asIds = request.return_tokens_as_token_ids ?? false;
    const top = request.top_logprobs ?? 0;
    const ids = request.return_token_ids ?? false;
    const base = { id, object: "chat.completion", created: Math.floor(Date.now() / 1000), model: request.model };
    if (!request.stream) {
      sendJson(res, 200, {
        ...base,
        choices: choices.map((c, index) => ({
          index,
          message: { role: "assistant", content: c.text, refusal: null },
          logprobs: request.logprobs ? chatLogprobs(model.tokenizer, c.tokens, c.logprobs, asIds, top) : null,
          finish_reason: c.finishReason,
          stop_reason: c.stopReason,
          ...(ids && { token_ids: c.tokens }),
        })),
        usage: usage(prompt.length, choices),
        ...(ids && { prompt_token_ids: prompt }),
      });
      return;
    }
    const includeUsage = request.stream_options?.include_usage ?? false;
    const chunk = { ...base, object: "chat.completion.chunk", ...(includeUsage && { usage: null }) };
    const events: unknown[] = [];
    choices.forEach((c, index) => {
      events.push({ ...chunk, choices: [{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }], ...(ids && index === 0 && { prompt_token_ids: prompt }) });
      textPieces(model.tokenizer, c).forEach((content, t) => {
        const logprobs = request.logprobs ? chatLogprobs(model.tokenizer, [c.tokens[t]!], [c.logprobs[t]!], asIds, top) : null;
        events.push({ ...chunk, choices: [{ index, delta: { content }, logprobs, finish_reason: null, ...(ids && { token_ids: [c.tokens[t]!] }) }] });
      });
      events.push({ ...chunk, choices: [{ index, delta: {}, logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }] });
    });
    if (includeUsage) events.push({ ...chunk, choices: [], usage: usage(prompt.length, choices) });
    sendEvents(res, events);
  };

  const routes: Record<string, { method: string; run: (req: IncomingMessage, res: ServerResponse) => Promise<void> }> = {
    "/v1/models": { method: "GET", run: async (_req, res) => sendJson(res, 200, { object: "list", data: Object.keys(models).map(modelEntry) }) },
    "/v1/completions": { method: "POST", run: async (req, res) => completions(await readBody(req, maxBodyBytes), res) },
    "/v1/chat/completions": { method: "POST", run: async (req, res) => chat(await readBody(req, maxBodyBytes), res) },
  };

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
    const modelName = /^\/v1\/models\/(.+)$/.exec(path)?.[1];
    const route =
      modelName !== undefined
        ? {
            method: "GET",
            run: async (_req: IncomingMessage, res: ServerResponse) => {
              const name = decodeURIComponent(modelName);
              if (!Object.hasOwn(models, name)) throw new ApiError(404, `The model \`${name}\` does not exist.`, "invalid_request_error", "model", "model_not_found");
              sendJson(res, 200, modelEntry(name));
            },
          }
        : routes[path];
    if (!route) return false;
    try {
      if (req.method !== route.method) throw new ApiError(405, `${path} accepts ${route.method} requests, not ${req.method ?? "?"}`, "invalid_request_error", null, "method_not_allowed");
      await route.run(req, res);
    } catch (error) {
      const api = apiErrorOf(error);
      if (api.status >= 500) log(`nexrl serve: ${req.method ?? "?"} ${path} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      sendError(res, api, api.status === 405 ? { allow: route.method } : {});
    }
    return true;
  };
}
