/**
 * The OpenAI wire format on the server side, which `openai-endpoints.ts` speaks for `nexrl
 * serve` and the agent gateway: request schemas (with vLLM's token-id options), body reading,
 * OpenAI error bodies, and the response bodies and server-sent events of `/v1/completions` and
 * `/v1/chat/completions`.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { tokenIdString } from "../inference/openai/vllm.js";
import type { ChatMessage, Tokenizer, ToolCall, ToolDefinition } from "../wire/tokenizer.js";
import { readBody, sendJson } from "./io.js";
import { MAX_SAMPLES_PER_REQUEST } from "./limits.js";
import { InputError, NexrlError, ProtocolError } from "../errors.js";

// ---------------------------------------------------------------------------------------------
// Requests

const tokenIds = z.array(z.int().min(0)).min(1);
const nullish = <T extends z.ZodType>(schema: T) => schema.nullish();

/**
 * Why more than one logprob per position is refused: a `SamplingClient` reports the logprob of
 * each sampled token and no alternatives, and answering N with the sampled token alone would look
 * like an answer to N.
 */
const ALTERNATIVES_REFUSED =
  "at most 1: this server reports the logprob of each sampled token and no alternatives to it; ask 0 or 1 (the sampled token's logprob), or compute other tokens' logprobs with a forward pass";

/** Fields both generation endpoints take (vLLM's token-id options included); `server` names the server in messages. */
function generationFields(server: string) {
  const unsupported = (field: string, neutral: string) => `${field} is not supported by ${server}; leave it ${neutral}`;
  return {
    model: z.string().min(1),
    n: nullish(z.int().min(1).max(MAX_SAMPLES_PER_REQUEST)),
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
    // Accepted only at their neutral values: neither server implements them.
    echo: nullish(z.literal(false, { error: unsupported("echo", "false") })),
    frequency_penalty: nullish(z.literal(0, { error: unsupported("frequency_penalty", "0") })),
    presence_penalty: nullish(z.literal(0, { error: unsupported("presence_penalty", "0") })),
    repetition_penalty: nullish(z.literal(1, { error: unsupported("repetition_penalty", "1") })),
    logit_bias: nullish(
      z
        .record(z.string(), z.number())
        .refine((bias) => Object.keys(bias).length === 0, unsupported("logit_bias", "empty")),
    ),
  };
}

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const toolCall = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
const chatMessage = z.object({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
  name: nullish(z.string()),
  tool_call_id: nullish(z.string()),
  tool_calls: nullish(z.array(toolCall)),
});
const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});
const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);

/** The request schemas of both endpoints, with `server` named in the messages about unsupported options. */
export function openAIRequestSchemas(server: string) {
  const fields = generationFields(server);
  return {
    /** `POST /v1/completions`. */
    completion: z.object({
      ...fields,
      prompt: z.union([z.string(), tokenIds, z.array(z.string()).min(1), z.array(tokenIds).min(1)]),
      logprobs: nullish(z.int().min(0).max(1, { error: ALTERNATIVES_REFUSED })),
      add_special_tokens: nullish(z.boolean()),
    }),
    /** `POST /v1/chat/completions`. */
    chat: z.object({
      ...fields,
      messages: z.array(chatMessage).min(1),
      max_completion_tokens: nullish(z.int().min(1)),
      logprobs: nullish(z.boolean()),
      top_logprobs: nullish(z.int().min(0).max(1, { error: ALTERNATIVES_REFUSED })),
      tools: nullish(z.array(tool)),
      tool_choice: nullish(toolChoice),
      parallel_tool_calls: nullish(z.boolean()),
      chat_template_kwargs: nullish(z.record(z.string(), z.unknown())),
      add_generation_prompt: nullish(z.boolean()),
    }),
  };
}

type Schemas = ReturnType<typeof openAIRequestSchemas>;
/** A parsed `POST /v1/completions` body. */
export type CompletionRequest = z.infer<Schemas["completion"]>;
/** A parsed `POST /v1/chat/completions` body. */
export type ChatRequest = z.infer<Schemas["chat"]>;
/** The fields both endpoints share. */
export type GenerationRequest = Omit<CompletionRequest, "prompt" | "logprobs" | "add_special_tokens">;

/**
 * Parses `body` with `schema`.
 * @throws {@link ProtocolError} 400 naming the first parameter at fault (`messages[0].content`).
 */
export function parseOpenAIRequest<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param =
    issue.path
      .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
      .join("")
      .replace(/^\./, "") || null;
  throw new ProtocolError(param ? `${param}: ${issue.message}` : issue.message, {
    status: 400,
    openaiType: "invalid_request_error",
    param: param,
  });
}

/**
 * Reads and parses a JSON request body.
 * @throws {@link ProtocolError} 413 past `maxBytes`, 400 for invalid JSON.
 */
export async function readOpenAIBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const body = await readBody(
    req,
    maxBytes,
    () =>
      new ProtocolError(`the request body exceeds ${maxBytes} bytes; send a shorter prompt`, {
        status: 413,
        code: "request_too_large",
        openaiType: "invalid_request_error",
      }),
  );
  try {
    return JSON.parse(body.toString("utf8")) as unknown;
  } catch (error) {
    throw new ProtocolError(`the request body is not valid JSON: ${(error as Error).message}`, {
      status: 400,
      openaiType: "invalid_request_error",
    });
  }
}

/** The conversation of a chat request as {@link ChatMessage}s (text parts joined, `null` content as `""`). */
export function requestMessages(request: Pick<ChatRequest, "messages">): ChatMessage[] {
  return request.messages.map((m) => ({
    role: m.role,
    content: typeof m.content === "string" ? m.content : (m.content ?? []).map((part) => part.text).join(""),
    ...(m.tool_calls && { tool_calls: m.tool_calls }),
    ...(m.tool_call_id != null && { tool_call_id: m.tool_call_id }),
    ...(m.name != null && { name: m.name }),
  }));
}

/** The tools of a chat request, as the chat template takes them. */
export function requestTools(request: Pick<ChatRequest, "tools">): ToolDefinition[] | undefined {
  return request.tools?.map((t) => ({ type: t.type, function: t.function }));
}

/** The stop strings of a request as a list. */
export function stopStrings(stop: GenerationRequest["stop"]): string[] {
  return stop == null ? [] : typeof stop === "string" ? [stop] : stop;
}

// ---------------------------------------------------------------------------------------------
// Responses

/** Why a choice ended, as OpenAI writes it. */
export type ChoiceFinishReason = "stop" | "length" | "abort" | "tool_calls";

/** One generated choice, ready to answer. */
export interface GeneratedChoice {
  /** The sampled token ids. */
  tokens: number[];
  /** Logprob of each sampled token. */
  logprobs: number[];
  /** The text answered (cut at a stop string unless it is to be kept; without parsed tool calls). */
  text: string;
  /** Why it ended. */
  finishReason: ChoiceFinishReason;
  /** The stop string that ended it (vLLM's `stop_reason`); null for EOS or length. */
  stopReason: string | null;
  /** Chat only: tool calls parsed out of the generated text. */
  toolCalls?: ToolCall[];
  /** Chat only: the model's reasoning, split out of the generated text (`<think>…</think>` and the like). */
  reasoning?: string;
  /** Chat only: tool calls the model wrote malformed (bad JSON, unknown structure, unclosed), left in `text`. */
  malformedToolCalls?: number;
}

/**
 * The decoded text of `tokens`, cut at the earliest of `stops` when the sampler stopped there
 * (unless `keepStop`), and the stop string that ended it. Ids the tokenizer has no token for (a
 * remote sampler's, beyond the tokenizer's vocabulary) decode to nothing.
 */
export function cutAtStop(
  tokenizer: Tokenizer,
  tokens: readonly number[],
  finishReason: string,
  stops: readonly string[],
  keepStop: boolean,
): { text: string; stopReason: string | null } {
  const text = tokenizer.decode(tokens, SKIP_UNKNOWN);
  const hit =
    finishReason === "stop"
      ? stops
          .map((s) => ({ s, at: text.indexOf(s) }))
          .filter((h) => h.at >= 0)
          .sort((a, b) => a.at - b.at)[0]
      : undefined;
  return { text: hit && !keepStop ? text.slice(0, hit.at) : text, stopReason: hit?.s ?? null };
}

/** Decoding of generated text: ids without a token read as nothing, as in {@link cutAtStop}. */
const SKIP_UNKNOWN = { unknownIds: "skip" } as const;

/** How the response of a request is written. */
export interface ResponseFormat {
  /** The response id (`cmpl-…`, `chatcmpl-…`). */
  id: string;
  /** The model name echoed back. */
  model: string;
  /** Decodes tokens for logprob entries and streamed pieces. */
  tokenizer: Tokenizer;
  /** Logprobs requested (completions: `logprobs` given; chat: `logprobs: true`). */
  logprobs: boolean;
  /** Chat `top_logprobs`. */
  topLogprobs: number;
  /** vLLM's `return_tokens_as_token_ids`: logprob tokens written `token_id:<n>`. */
  tokenIdStrings: boolean;
  /** vLLM's `return_token_ids`: prompt and choice ids in the response. */
  returnTokenIds: boolean;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
}

/** The {@link ResponseFormat} fields a request decides. */
export function responseFormat(
  request: GenerationRequest & { logprobs?: number | boolean | null; top_logprobs?: number | null },
  id: string,
  tokenizer: Tokenizer,
): ResponseFormat {
  return {
    id,
    model: request.model,
    tokenizer,
    logprobs: typeof request.logprobs === "boolean" ? request.logprobs : request.logprobs != null,
    topLogprobs: request.top_logprobs ?? 0,
    tokenIdStrings: request.return_tokens_as_token_ids ?? false,
    returnTokenIds: request.return_token_ids ?? false,
    includeUsage: request.stream_options?.include_usage ?? false,
  };
}

/** The text each token adds to a streamed choice; together they spell `choice.text` exactly. */
export function textPieces(tokenizer: Tokenizer, choice: GeneratedChoice): string[] {
  let emitted = 0;
  return choice.tokens.map((_, i) => {
    const last = i === choice.tokens.length - 1;
    const prefix = last ? choice.text : tokenizer.decode(choice.tokens.slice(0, i + 1), SKIP_UNKNOWN);
    // A prefix ending inside a character (U+FFFD) or past a cut stop string is held back.
    if (!choice.text.startsWith(prefix) || prefix.length < emitted) return "";
    const piece = prefix.slice(emitted);
    emitted = prefix.length;
    return piece;
  });
}

function tokenText(format: ResponseFormat, id: number): string {
  return format.tokenIdStrings ? tokenIdString(id) : format.tokenizer.decode([id], SKIP_UNKNOWN);
}

/** Legacy completions logprobs; `top_logprobs` holds the sampled token only (the sampler reports no alternatives). */
function completionLogprobs(
  format: ResponseFormat,
  tokens: readonly number[],
  logprobs: readonly number[],
  offset = 0,
) {
  const strings = tokens.map((id) => tokenText(format, id));
  const textOffset: number[] = [];
  for (const s of strings) {
    textOffset.push(offset);
    offset += s.length;
  }
  return {
    tokens: strings,
    token_logprobs: logprobs,
    top_logprobs: strings.map((s, i) => ({ [s]: logprobs[i]! })),
    text_offset: textOffset,
  };
}

/** Chat logprobs; `top_logprobs` holds the sampled token only when any are asked (the sampler reports no alternatives). */
export function chatLogprobs(format: ResponseFormat, tokens: readonly number[], logprobs: readonly number[]) {
  return {
    content: tokens.map((id, i) => {
      const token = tokenText(format, id);
      const entry = { token, logprob: logprobs[i]!, bytes: [...Buffer.from(token, "utf8")] };
      return { ...entry, top_logprobs: format.topLogprobs > 0 ? [entry] : [] };
    }),
    refusal: null,
  };
}

function usage(promptTokens: number, choices: readonly GeneratedChoice[]) {
  const completion = choices.reduce((sum, c) => sum + c.tokens.length, 0);
  return { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
}

const now = (): number => Math.floor(Date.now() / 1000);

/** The body of a `/v1/completions` answer: `results[p]` are the choices of `prompts[p]`. */
export function completionBody(
  format: ResponseFormat,
  prompts: readonly number[][],
  results: readonly GeneratedChoice[][],
) {
  const choices = results.flatMap((choicesOfPrompt, p) =>
    choicesOfPrompt.map((c, j) => ({
      index: p * choicesOfPrompt.length + j,
      text: c.text,
      logprobs: format.logprobs ? completionLogprobs(format, c.tokens, c.logprobs) : null,
      finish_reason: c.finishReason,
      stop_reason: c.stopReason,
      ...(format.returnTokenIds && { prompt_token_ids: prompts[p], token_ids: c.tokens }),
    })),
  );
  const promptCount = prompts.reduce((sum, p) => sum + p.length, 0);
  return {
    id: format.id,
    object: "text_completion",
    created: now(),
    model: format.model,
    choices,
    usage: usage(promptCount, results.flat()),
  };
}

/** The server-sent events of a streamed `/v1/completions` answer: one piece of text per token. */
export function completionEvents(
  format: ResponseFormat,
  prompts: readonly number[][],
  results: readonly GeneratedChoice[][],
): unknown[] {
  const base = { id: format.id, object: "text_completion", created: now(), model: format.model };
  const withUsage = format.includeUsage ? { usage: null } : {};
  const events: unknown[] = [];
  results.forEach((choicesOfPrompt, p) =>
    choicesOfPrompt.forEach((c, j) => {
      const index = p * choicesOfPrompt.length + j;
      let offset = 0;
      textPieces(format.tokenizer, c).forEach((text, t) => {
        const logprobs = format.logprobs ? completionLogprobs(format, [c.tokens[t]!], [c.logprobs[t]!], offset) : null;
        offset += logprobs?.tokens[0]!.length ?? 0;
        const ids = format.returnTokenIds
          ? { token_ids: [c.tokens[t]!], ...(t === 0 && { prompt_token_ids: prompts[p] }) }
          : {};
        events.push({ ...base, choices: [{ index, text, logprobs, finish_reason: null, ...ids }], ...withUsage });
      });
      events.push({
        ...base,
        choices: [{ index, text: "", logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }],
        ...withUsage,
      });
    }),
  );
  const promptCount = prompts.reduce((sum, p) => sum + p.length, 0);
  if (format.includeUsage) events.push({ ...base, choices: [], usage: usage(promptCount, results.flat()) });
  return events;
}

/** The assistant message of a chat choice: its text, its reasoning (`reasoning_content`, as vLLM and SGLang write it) and its tool calls. */
function assistantMessage(c: GeneratedChoice) {
  return {
    role: "assistant",
    content: c.toolCalls?.length && c.text === "" ? null : c.text,
    refusal: null,
    ...(c.reasoning !== undefined && { reasoning_content: c.reasoning }),
    ...(c.toolCalls?.length && { tool_calls: c.toolCalls }),
  };
}

/** The body of a `/v1/chat/completions` answer. */
export function chatCompletionBody(
  format: ResponseFormat,
  prompt: readonly number[],
  choices: readonly GeneratedChoice[],
) {
  return {
    id: format.id,
    object: "chat.completion",
    created: now(),
    model: format.model,
    choices: choices.map((c, index) => ({
      index,
      message: assistantMessage(c),
      logprobs: format.logprobs ? chatLogprobs(format, c.tokens, c.logprobs) : null,
      finish_reason: c.finishReason,
      stop_reason: c.stopReason,
      ...(format.returnTokenIds && { token_ids: c.tokens }),
    })),
    usage: usage(prompt.length, choices),
    ...(format.returnTokenIds && { prompt_token_ids: prompt }),
  };
}

/**
 * The server-sent events of a streamed `/v1/chat/completions` answer: a role chunk, the text one
 * token per chunk (a choice with reasoning or tool calls sends its `reasoning_content` in one
 * chunk, its text in one chunk, then one chunk with its tool calls), and a chunk with the finish reason.
 */
export function chatCompletionEvents(
  format: ResponseFormat,
  prompt: readonly number[],
  choices: readonly GeneratedChoice[],
): unknown[] {
  const chunk = {
    id: format.id,
    object: "chat.completion.chunk",
    created: now(),
    model: format.model,
    ...(format.includeUsage && { usage: null }),
  };
  const events: unknown[] = [];
  choices.forEach((c, index) => {
    events.push({
      ...chunk,
      choices: [{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
      ...(format.returnTokenIds && index === 0 && { prompt_token_ids: prompt }),
    });
    const delta = (content: string, tokens: number[], logprobs: number[]) => ({
      index,
      delta: { content },
      logprobs: format.logprobs ? chatLogprobs(format, tokens, logprobs) : null,
      finish_reason: null,
      ...(format.returnTokenIds && { token_ids: tokens }),
    });
    if (c.reasoning !== undefined)
      events.push({
        ...chunk,
        choices: [{ index, delta: { reasoning_content: c.reasoning }, logprobs: null, finish_reason: null }],
      });
    if (c.toolCalls?.length || c.reasoning !== undefined) {
      // The content is not a prefix of the decoded tokens: it comes whole, with every token's ids and logprobs.
      events.push({ ...chunk, choices: [delta(c.text, c.tokens, c.logprobs)] });
    } else {
      textPieces(format.tokenizer, c).forEach((content, t) =>
        events.push({ ...chunk, choices: [delta(content, [c.tokens[t]!], [c.logprobs[t]!])] }),
      );
    }
    if (c.toolCalls?.length) {
      const calls = c.toolCalls.map((call, i) => ({ index: i, id: call.id, type: call.type, function: call.function }));
      events.push({
        ...chunk,
        choices: [{ index, delta: { tool_calls: calls }, logprobs: null, finish_reason: null }],
      });
    }
    events.push({
      ...chunk,
      choices: [{ index, delta: {}, logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }],
    });
  });
  if (format.includeUsage) events.push({ ...chunk, choices: [], usage: usage(prompt.length, choices) });
  return events;
}

// ---------------------------------------------------------------------------------------------
// Answers

/** Writes server-sent events; ends with `data: [DONE]`. */
export function sendOpenAIEvents(res: ServerResponse, events: readonly unknown[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
  res.end("data: [DONE]\n\n");
}

/**
 * The answer to `error`: sampler, template and URL errors about the request are 400s, and so is
 * a 400 from the model's own server (a prompt too long for it, say); other failures are 500s.
 */
export function openAIErrorOf(error: unknown): ProtocolError {
  if (error instanceof ProtocolError && error.openaiType !== undefined) return error;
  const clientFault =
    error instanceof InputError || (error instanceof NexrlError && (error as { status?: unknown }).status === 400);
  if (clientFault) return new ProtocolError(error.message, { status: 400, openaiType: "invalid_request_error" });
  return new ProtocolError(`the model failed: ${error instanceof Error ? error.message : String(error)}`, {
    status: 500,
    openaiType: "server_error",
  });
}

/** Answers `error` in OpenAI's error shape (or drops the connection when a stream has begun). */
export function sendOpenAIError(res: ServerResponse, error: ProtocolError, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(
    res,
    error.status,
    {
      error: {
        message: error.message,
        type: error.openaiType ?? "invalid_request_error",
        param: error.param,
        code: error.openaiCode,
      },
    },
    headers,
  );
}
