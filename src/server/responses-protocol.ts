/**
 * The OpenAI Responses API on the server side (`POST /v1/responses`), which
 * `responses-endpoints.ts` speaks for `nexrl serve` and the agent gateway: the request schema
 * (with a 400 naming the parameter for everything not supported), input items → the chat
 * messages every dialect samples through, a sampled choice → output items, and the response body
 * and server-sent events of an answer. Shapes are those of the official `openai` package's types.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import type OpenAI from "openai";
import { z } from "zod";
import { appendAll } from "../wire/arrays.js";
import type { ChatMessage, Tokenizer, ToolCall, ToolDefinition } from "../wire/tokenizer.js";
import type { GeneratedChoice, GenerationRequest } from "./openai-protocol.js";

/** A response object as the Responses API answers it (`output_text` is the client's convenience, not sent). */
export type ResponseObject = Omit<OpenAI.Responses.Response, "output_text" | "output"> & {
  output: ResponseOutputItem[];
};
/** An output item the gateway and `nexrl serve` produce. */
export type ResponseOutputItem =
  | OpenAI.Responses.ResponseOutputMessage
  | OpenAI.Responses.ResponseFunctionToolCall
  | OpenAI.Responses.ResponseReasoningItem;
type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

// ---------------------------------------------------------------------------------------------
// Requests

const nullish = <T extends z.ZodType>(schema: T) => schema.nullish();
const typeName = (input: unknown): string =>
  typeof input === "object" && input !== null && "type" in input ? String(input.type) : "(none)";
/** Input items without `type` are messages (the API's EasyInputMessage). */
const messageByDefault = (item: unknown): unknown =>
  typeof item === "object" && item !== null && !Array.isArray(item) && !("type" in item)
    ? { ...item, type: "message" }
    : item;

/** The request schema of `POST /v1/responses`; `server` names the server in messages about unsupported options. */
export function responsesRequestSchema(server: string) {
  const notSupported = (what: string, fix: string) => `${what} is not supported by ${server}; ${fix}`;
  // Text given as a string reads as one part, so that errors name the part at fault (not a union).
  const textParts = (types: readonly string[]) =>
    z.preprocess(
      (v) => (typeof v === "string" ? [{ type: "input_text", text: v }] : v),
      z.array(
        z.discriminatedUnion(
          "type",
          [
            z.object({ type: z.literal("input_text"), text: z.string() }),
            z.object({ type: z.literal("output_text"), text: z.string() }),
          ],
          {
            error: (issue) =>
              notSupported(
                `a content part of type \`${typeName(issue.input)}\``,
                `send text parts (${types.join(", ")}); images, files and audio cannot be read by the policy`,
              ),
          },
        ),
      ),
    );
  const message = z.object({
    type: z.literal("message"),
    role: z.enum(["user", "assistant", "system", "developer"]),
    content: textParts(["input_text", "output_text"]),
    id: nullish(z.string()),
    status: nullish(z.string()),
    phase: nullish(z.string()),
  });
  const functionCall = z.object({
    type: z.literal("function_call"),
    call_id: z.string().min(1),
    name: z.string().min(1),
    arguments: z.string(),
    id: nullish(z.string()),
    status: nullish(z.string()),
  });
  const functionCallOutput = z.object({
    type: z.literal("function_call_output"),
    call_id: z.string().min(1),
    output: textParts(["input_text"]),
    id: nullish(z.string()),
    status: nullish(z.string()),
  });
  const reasoning = z.object({
    type: z.literal("reasoning"),
    id: nullish(z.string()),
    summary: nullish(z.array(z.object({ type: z.literal("summary_text"), text: z.string() }))),
    content: nullish(z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() }))),
    encrypted_content: nullish(z.string()),
    status: nullish(z.string()),
  });
  const itemReference = z.object({ type: z.literal("item_reference"), id: z.string().min(1) });
  const inputItem = z.preprocess(
    messageByDefault,
    z.discriminatedUnion("type", [message, functionCall, functionCallOutput, reasoning, itemReference], {
      error: (issue) =>
        notSupported(
          `an input item of type \`${typeName(issue.input)}\``,
          "send message, function_call, function_call_output, reasoning or item_reference items (built-in tools are not supported)",
        ),
    }),
  );
  const functionTool = z.object({
    type: z.literal("function"),
    name: z.string().min(1),
    description: nullish(z.string()),
    parameters: nullish(z.record(z.string(), z.unknown())),
    strict: nullish(z.boolean()),
  });
  const tool = z.discriminatedUnion("type", [functionTool], {
    error: (issue) =>
      notSupported(
        `the built-in tool \`${typeName(issue.input)}\``,
        "give function tools ({ type: 'function', name, parameters }) and run them in the agent",
      ),
  });
  // The message follows the parameter's name (`conversation: not supported by …`).
  const refused = (fix: string) => nullish(z.unknown().refine(() => false, `not supported by ${server}; ${fix}`));
  return z.object({
    model: z.string().min(1),
    input: nullish(
      z.preprocess(
        (v) => (typeof v === "string" ? [{ type: "message", role: "user", content: v }] : v),
        z.array(inputItem),
      ),
    ),
    instructions: nullish(z.string()),
    tools: nullish(z.array(tool)),
    tool_choice: nullish(
      z.enum(["auto", "none"], {
        error: notSupported(
          'a tool_choice other than "auto" or "none"',
          "the policy cannot be forced to call a tool; send auto or none",
        ),
      }),
    ),
    parallel_tool_calls: nullish(z.boolean()),
    max_output_tokens: nullish(z.int().min(1)),
    temperature: nullish(z.number().min(0).max(2)),
    top_p: nullish(z.number().gt(0).max(1)),
    previous_response_id: nullish(z.string().min(1)),
    store: nullish(z.boolean()),
    metadata: nullish(
      z
        .record(z.string().max(64), z.string().max(512))
        .refine((m) => Object.keys(m).length <= 16, "at most 16 keys (of up to 64 characters, values up to 512)"),
    ),
    stream: nullish(z.boolean()),
    stream_options: nullish(z.object({ include_obfuscation: nullish(z.boolean()) })),
    text: nullish(
      z.object({
        format: nullish(
          z.object({
            type: z.literal("text", {
              error: notSupported("a text.format other than text", "structured outputs are not implemented"),
            }),
          }),
        ),
        verbosity: nullish(z.enum(["low", "medium", "high"])),
      }),
    ),
    reasoning: nullish(
      z.object({
        effort: nullish(z.enum(["none", "minimal", "low", "medium", "high", "xhigh"])),
        summary: nullish(z.enum(["auto", "concise", "detailed"])),
        generate_summary: nullish(z.enum(["auto", "concise", "detailed"])),
      }),
    ),
    include: nullish(
      z.array(
        z.enum(["message.output_text.logprobs", "reasoning.encrypted_content"], {
          error: notSupported(
            "include values other than message.output_text.logprobs and reasoning.encrypted_content",
            "leave them out",
          ),
        }),
      ),
    ),
    truncation: nullish(
      z.literal("disabled", { error: notSupported("truncation other than disabled", "leave it out") }),
    ),
    service_tier: nullish(
      z.enum(["auto", "default"], { error: notSupported("a service_tier other than auto", "leave it out") }),
    ),
    user: nullish(z.string()),
    safety_identifier: nullish(z.string()),
    prompt_cache_key: nullish(z.string()),
    top_logprobs: nullish(z.int().min(0).max(20)),
    background: nullish(
      z.literal(false, { error: notSupported("background mode", "leave background out (or false)") }),
    ),
    conversation: refused("send previous_response_id or the whole input"),
    prompt: refused("send instructions and input"),
    context_management: refused("leave it out"),
    moderation: refused("leave it out"),
    prompt_cache_retention: refused("leave it out"),
    max_tool_calls: refused("limit tool calls in the agent"),
  });
}

/** A parsed `POST /v1/responses` body. */
export type ResponsesRequest = z.infer<ReturnType<typeof responsesRequestSchema>>;
type InputItem = NonNullable<ResponsesRequest["input"]>[number];
/** An input item other than a reference: what an `item_reference` resolves to. */
export type ResolvedItem = Exclude<InputItem, { type: "item_reference" }> | ResponseOutputItem;

/** The sampling fields of a Responses request, in chat completions' names (what a generator reads). */
export function responsesSampling(request: ResponsesRequest): GenerationRequest {
  return {
    model: request.model,
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { top_p: request.top_p }),
  };
}

/** The function tools of a request, as the chat template takes them. */
export function responsesTools(request: ResponsesRequest): ToolDefinition[] | undefined {
  return request.tools?.map((t) => ({
    type: "function",
    function: {
      name: t.name,
      ...(t.description != null && { description: t.description }),
      ...(t.parameters != null && { parameters: t.parameters }),
    },
  }));
}

/** The text of content parts (a stored message's refusal parts read as their text). */
const partsText = (content: ReadonlyArray<{ text: string } | { refusal: string }>): string =>
  content.map((part) => ("text" in part ? part.text : part.refusal)).join("");

/**
 * The chat messages of input items: messages keep their role (`developer` becomes `system`), an
 * assistant's message and the function calls after it become one assistant message with
 * `tool_calls` (as a chat-completions agent sends it), and function call outputs become `tool`
 * messages. Reasoning items are not rendered (the sampled tokens of an answered turn hold them).
 * `item_reference` items are looked up with `resolve`.
 */
export function inputMessages(
  input: ResponsesRequest["input"],
  resolve: (id: string, param: string) => ResolvedItem,
): ChatMessage[] {
  if (input == null) return [];
  const messages: ChatMessage[] = [];
  let turn: { content?: string; calls: ToolCall[]; reasoned: boolean } | undefined;
  const flush = () => {
    if (!turn) return;
    messages.push({
      role: "assistant",
      content: turn.content ?? "",
      ...(turn.calls.length > 0 && { tool_calls: turn.calls }),
    });
    turn = undefined;
  };
  // A part of an assistant turn that comes before what the turn already holds starts a new turn.
  const openTurn = (started: (t: NonNullable<typeof turn>) => boolean) => {
    if (turn && started(turn)) flush();
    return (turn ??= { calls: [], reasoned: false });
  };
  input.forEach((given, i) => {
    const item = given.type === "item_reference" ? resolve(given.id, `input[${i}].id`) : given;
    switch (item.type) {
      case "reasoning":
        openTurn((t) => t.reasoned || t.content !== undefined || t.calls.length > 0).reasoned = true;
        return;
      case "function_call":
        openTurn(() => false).calls.push({
          id: item.call_id,
          type: "function",
          function: { name: item.name, arguments: item.arguments },
        });
        return;
      case "function_call_output":
        flush();
        messages.push({ role: "tool", content: partsText(item.output), tool_call_id: item.call_id });
        return;
      case "message": {
        const content = partsText(item.content);
        if (item.role === "assistant") {
          openTurn((t) => t.content !== undefined || t.calls.length > 0).content = content;
          return;
        }
        flush();
        messages.push({ role: item.role === "developer" ? "system" : item.role, content });
        return;
      }
    }
  });
  flush();
  return messages;
}

/** The assistant message a choice answers, as it comes back in a later conversation. */
export function answerMessage(choice: GeneratedChoice): ChatMessage {
  return {
    role: "assistant",
    content: choice.text,
    ...(choice.toolCalls?.length && { tool_calls: choice.toolCalls }),
  };
}

// ---------------------------------------------------------------------------------------------
// Responses

/** A new id with `prefix` (`resp`, `msg`, `fc`, `rs`): 24 random bytes in hex, as OpenAI's ids look. */
export function responsesId(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString("hex")}`;
}

/** Logprobs of sampled tokens as `output_text.logprobs` holds them. */
export type TokenLogprob = OpenAI.Responses.ResponseOutputText.Logprob;

/** Whether a request asks for logprobs (`include: ["message.output_text.logprobs"]`). */
export function wantsLogprobs(request: ResponsesRequest): boolean {
  return request.include?.includes("message.output_text.logprobs") ?? false;
}

/**
 * The output items of a choice: its reasoning (when split out of the text), its message (unless
 * the choice only calls tools and no `logprobs` are to be given), then one `function_call` item
 * per tool call, whose `call_id` is the call's id. `logprobs`, when given, are those of every
 * sampled token (reasoning and tool-call text included) and go with the message's text. An
 * answer cut by the token limit is `incomplete`.
 */
export function responseOutput(choice: GeneratedChoice, logprobs?: TokenLogprob[]): ResponseOutputItem[] {
  const status = choice.finishReason === "length" ? "incomplete" : "completed";
  const output: ResponseOutputItem[] = [];
  if (choice.reasoning !== undefined)
    output.push({
      id: responsesId("rs"),
      type: "reasoning",
      summary: [],
      content: [{ type: "reasoning_text", text: choice.reasoning }],
      status,
    });
  const calls = choice.toolCalls ?? [];
  if (choice.text !== "" || calls.length === 0 || logprobs)
    output.push({
      id: responsesId("msg"),
      type: "message",
      role: "assistant",
      status,
      content: [{ type: "output_text", text: choice.text, annotations: [], logprobs: logprobs ?? [] }],
    });
  for (const call of calls)
    output.push({
      id: responsesId("fc"),
      type: "function_call",
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status,
    });
  return output;
}

/** The sampled tokens that carry a choice's reasoning: the shortest prefix whose text holds all of it. */
function reasoningTokens(tokenizer: Tokenizer, choice: GeneratedChoice): number {
  const reasoning = choice.reasoning?.trim();
  if (!reasoning) return 0;
  const holds = (n: number) => tokenizer.decode(choice.tokens.slice(0, n), { unknownIds: "skip" }).includes(reasoning);
  if (!holds(choice.tokens.length)) return 0;
  let [lo, hi] = [0, choice.tokens.length];
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (holds(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The usage of a response: prompt and sampled tokens (nothing is cached), reasoning tokens among them. */
export function responseUsage(
  tokenizer: Tokenizer,
  promptTokens: number,
  choice: GeneratedChoice,
): OpenAI.Responses.ResponseUsage {
  return {
    input_tokens: promptTokens,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: choice.tokens.length,
    output_tokens_details: { reasoning_tokens: reasoningTokens(tokenizer, choice) },
    total_tokens: promptTokens + choice.tokens.length,
  };
}

/** The response object answering `request` with `output`. */
export function responseObject(
  request: ResponsesRequest,
  id: string,
  createdAt: number,
  output: ResponseOutputItem[],
  usage: OpenAI.Responses.ResponseUsage,
): ResponseObject {
  const incomplete = output.some((item) => item.status === "incomplete");
  return {
    id,
    object: "response",
    created_at: createdAt,
    status: incomplete ? "incomplete" : "completed",
    completed_at: incomplete ? null : Math.floor(Date.now() / 1000),
    background: false,
    error: null,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    model: request.model,
    output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: {
      effort: request.reasoning?.effort ?? null,
      summary: request.reasoning?.summary ?? null,
    },
    service_tier: "default",
    temperature: request.temperature ?? 1,
    text: { format: { type: "text" }, ...(request.text?.verbosity != null && { verbosity: request.text.verbosity }) },
    top_logprobs: request.top_logprobs ?? 0,
    tool_choice: request.tool_choice ?? "auto",
    tools: (request.tools ?? []).map((t) => ({
      type: "function",
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? true,
    })),
    top_p: request.top_p ?? 1,
    truncation: "disabled",
    usage,
    ...(request.user != null && { user: request.user }),
  };
}

/**
 * The deltas of a streamed text: one per non-empty piece, each with the logprobs of the tokens
 * since the last one (a piece per token), or the whole text in one delta when the pieces do not
 * spell it (a choice whose tool calls or reasoning were split out of the text).
 */
function textDeltas(
  part: OpenAI.Responses.ResponseOutputText,
  pieces: readonly string[],
): Array<{ delta: string; logprobs: TokenLogprob[] }> {
  const logprobs = part.logprobs ?? [];
  if (pieces.join("") !== part.text) return part.text === "" ? [] : [{ delta: part.text, logprobs }];
  const deltas: Array<{ delta: string; logprobs: TokenLogprob[] }> = [];
  let held: TokenLogprob[] = [];
  pieces.forEach((delta, t) => {
    if (logprobs[t]) held.push(logprobs[t]);
    if (delta === "") return;
    deltas.push({ delta, logprobs: held });
    held = [];
  });
  // Tokens after the last piece of text (an end-of-sequence token) go with the last delta.
  if (held.length > 0 && deltas.length > 0) appendAll(deltas.at(-1)!.logprobs, held);
  return deltas;
}

/**
 * The server-sent events of a streamed response, as OpenAI sends them: `response.created` and
 * `response.in_progress` (no output yet), then per output item `response.output_item.added`, its
 * content (`response.content_part.added`, `response.output_text.delta` per piece of `textPieces`
 * (the text each sampled token adds, as `textPieces` of `openai-protocol.ts` makes them; with the
 * logprobs of the tokens since the last delta),
 * `response.output_text.done`, `response.content_part.done`; reasoning as `reasoning_text`;
 * `response.function_call_arguments.delta`/`.done`) and `response.output_item.done`, and
 * `response.completed` (or `response.incomplete`); numbered by `sequence_number` from 0.
 */
export function responseEvents(response: ResponseObject, textPieces: readonly string[]): StreamEvent[] {
  const events: StreamEvent[] = [];
  let sequence = 0;
  const push = (event: Record<string, unknown> & { type: StreamEvent["type"] }) =>
    events.push({ ...event, sequence_number: sequence++ } as StreamEvent);
  const started = {
    ...response,
    status: "in_progress",
    completed_at: null,
    incomplete_details: null,
    output: [],
    usage: null,
  } as unknown as OpenAI.Responses.Response;
  push({ type: "response.created", response: started });
  push({ type: "response.in_progress", response: started });
  response.output.forEach((item, output_index) => {
    const at = { item_id: item.id!, output_index };
    if (item.type === "message") {
      push({ type: "response.output_item.added", output_index, item: { ...item, status: "in_progress", content: [] } });
      item.content.forEach((part, content_index) => {
        if (part.type !== "output_text") return;
        push({ type: "response.content_part.added", ...at, content_index, part: { ...part, text: "" } });
        for (const { delta, logprobs } of textDeltas(part, textPieces))
          push({ type: "response.output_text.delta", ...at, content_index, delta, logprobs });
        push({
          type: "response.output_text.done",
          ...at,
          content_index,
          text: part.text,
          logprobs: part.logprobs ?? [],
        });
        push({ type: "response.content_part.done", ...at, content_index, part });
      });
    } else if (item.type === "reasoning") {
      push({ type: "response.output_item.added", output_index, item: { ...item, status: "in_progress", content: [] } });
      (item.content ?? []).forEach((part, content_index) => {
        push({ type: "response.content_part.added", ...at, content_index, part: { ...part, text: "" } });
        if (part.text !== "") push({ type: "response.reasoning_text.delta", ...at, content_index, delta: part.text });
        push({ type: "response.reasoning_text.done", ...at, content_index, text: part.text });
        push({ type: "response.content_part.done", ...at, content_index, part });
      });
    } else {
      push({
        type: "response.output_item.added",
        output_index,
        item: { ...item, status: "in_progress", arguments: "" },
      });
      if (item.arguments !== "") push({ type: "response.function_call_arguments.delta", ...at, delta: item.arguments });
      push({ type: "response.function_call_arguments.done", ...at, name: item.name, arguments: item.arguments });
    }
    push({ type: "response.output_item.done", output_index, item });
  });
  push({
    type: response.status === "incomplete" ? "response.incomplete" : "response.completed",
    response: response as OpenAI.Responses.Response,
  });
  return events;
}

/** Writes server-sent events with their `event:` lines, as the Responses API streams (no `[DONE]`). */
export function sendResponseEvents(res: ServerResponse, events: readonly StreamEvent[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const event of events) res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
  res.end();
}
