/**
 * Anthropic's Messages API on the server side (`POST /v1/messages`, `POST
 * /v1/messages/count_tokens`), as `anthropic-endpoints.ts` speaks it for `nexrl serve` and the
 * agent gateway: the request schema (refusing what nexrl cannot do, by name), content blocks →
 * {@link ChatMessage}s, a generated choice → a `Message` body or its server-sent events, and
 * Anthropic's error shape. The shapes are those of the official `@anthropic-ai/sdk` types.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { z } from "zod";
import { appendAll } from "../wire/arrays.js";
import type { ChatMessage, Tokenizer, ToolCall, ToolDefinition } from "../wire/tokenizer.js";
import { textPieces, type GeneratedChoice } from "./openai-protocol.js";
import { sendJson } from "./io.js";
import { ProtocolError } from "../errors.js";

// ---------------------------------------------------------------------------------------------
// Requests

/** Refusals are 400s; the `openaiType` lets `openAIErrorOf` pass them through unchanged. */
const INVALID = { openaiType: "invalid_request_error" } as const;

/** `cache_control` changes what Anthropic caches, never the output: accepted and ignored. */
const cacheControl = z.object({ type: z.literal("ephemeral"), ttl: z.string().optional() }).nullish();
/** Citations of an earlier answer's text: only none, since nexrl does not render them. */
const noCitations = z.array(z.unknown()).max(0, "citations are not supported; send the text without them").nullish();

const textBlock = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  cache_control: cacheControl,
  citations: noCitations,
});
const toolUseBlock = z.strictObject({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
  caller: z.object({ type: z.literal("direct") }, { error: "only direct tool calls are supported" }).optional(),
});
const resultText = textBlock.extend({
  type: z.literal("text", {
    error: "tool_result content must be a string or text blocks (images and documents are not supported)",
  }),
});
const toolResultBlock = z.strictObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(resultText)]).optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
});
const thinkingBlock = z.strictObject({
  type: z.literal("thinking"),
  thinking: z.string(),
  signature: z.string(),
});

/** Why a content block type is refused, for the types Anthropic has and nexrl does not. */
function refusedBlock(type: unknown, server: string): string {
  switch (type) {
    case "redacted_thinking":
      return `redacted_thinking blocks hold reasoning encrypted by Anthropic, which ${server} cannot read; leave them out (the thinking of turns sampled here comes back as thinking blocks)`;
    case "image":
    case "document":
    case "search_result":
    case "container_upload":
      return `${type} blocks are not supported by ${server}: the policy reads text only; send text blocks`;
    default:
      return typeof type === "string" && /tool_use$|tool_result$/.test(type)
        ? `${type} blocks belong to Anthropic's server tools, which ${server} does not run; run tools in the agent and send tool_use / tool_result blocks`
        : `content block type ${JSON.stringify(type)} is not supported by ${server}; send text, tool_use, tool_result or thinking blocks`;
  }
}

/** A content block of the `type`s nexrl reads, or a refusal naming the type. */
function contentBlock(server: string) {
  return z.discriminatedUnion("type", [textBlock, toolUseBlock, toolResultBlock, thinkingBlock], {
    error: (issue) =>
      issue.code === "invalid_union" && typeof issue.input === "object" && issue.input !== null
        ? refusedBlock((issue.input as { type?: unknown }).type, server)
        : undefined,
  });
}

const tool = (server: string) =>
  z.strictObject({
    // Checked first: a server tool has no input_schema, and its type says why it is refused.
    type: z
      .literal("custom", {
        error: `only custom tools (name, description, input_schema) are supported by ${server}; Anthropic's server and client tools (web_search, bash, text_editor, …) are not`,
      })
      .nullish(),
    name: z.string().min(1),
    description: z.string().optional(),
    input_schema: z.looseObject({ type: z.literal("object") }),
    cache_control: cacheControl,
    // Streaming granularity of a tool's input only.
    eager_input_streaming: z.boolean().nullish(),
    strict: z
      .literal(false, { error: `strict tool inputs are not enforced by ${server}; leave strict out` })
      .optional(),
  });

const toolChoice = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
  z.strictObject({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
  z.strictObject({
    type: z.literal("tool"),
    name: z.string().min(1),
    disable_parallel_tool_use: z.boolean().optional(),
  }),
  z.strictObject({ type: z.literal("none") }),
]);

const thinkingConfig = (server: string) => {
  // Thinking is always returned in full, never omitted.
  const display = z
    .literal("summarized", { error: `display "omitted" is not supported by ${server}; leave display out` })
    .nullish();
  return z.discriminatedUnion(
    "type",
    [
      z.strictObject({ type: z.literal("enabled"), budget_tokens: z.int().min(1024), display }),
      z.strictObject({ type: z.literal("disabled") }),
      z.strictObject({ type: z.literal("adaptive"), display }),
    ],
    { error: `must be enabled, adaptive or disabled (between_tools is not supported by ${server})` },
  );
};

/** The request schemas of `POST /v1/messages` and `POST /v1/messages/count_tokens`, with `server` named in refusals. */
export function anthropicRequestSchemas(server: string) {
  const block = contentBlock(server);
  const message = z.strictObject({
    role: z.enum(["user", "assistant"]),
    content: z.union([z.string(), z.array(block)]),
  });
  const common = {
    model: z.string().min(1),
    messages: z.array(message).min(1),
    system: z.union([z.string(), z.array(textBlock)]).optional(),
    tools: z.array(tool(server)).optional(),
    tool_choice: toolChoice.optional(),
    thinking: thinkingConfig(server).optional(),
    cache_control: cacheControl,
  };
  return {
    /** `POST /v1/messages`. */
    create: z
      .strictObject({
        ...common,
        max_tokens: z.int().min(1),
        stop_sequences: z.array(z.string().min(1)).optional(),
        stream: z.boolean().optional(),
        temperature: z.number().min(0).max(1).optional(),
        top_p: z.number().gt(0).max(1).optional(),
        top_k: z.int().min(0).optional(),
        metadata: z.strictObject({ user_id: z.string().nullish() }).optional(),
        // Capacity routing only: cannot change the output.
        service_tier: z.enum(["auto", "standard_only"]).optional(),
      })
      .check((ctx) => {
        const { thinking, max_tokens, tool_choice, tools } = ctx.value;
        if (thinking?.type === "enabled" && thinking.budget_tokens >= max_tokens)
          ctx.issues.push({
            code: "custom",
            input: thinking.budget_tokens,
            path: ["thinking", "budget_tokens"],
            message: `must be less than max_tokens (${max_tokens}), which bounds thinking and answer together`,
          });
        if (tool_choice?.type === "tool" && !tools?.some((t) => t.name === tool_choice.name))
          ctx.issues.push({
            code: "custom",
            input: tool_choice.name,
            path: ["tool_choice", "name"],
            message: `names no tool of the request; name one of: ${tools?.map((t) => t.name).join(", ") || "none given"}`,
          });
      }),
    /** `POST /v1/messages/count_tokens`. */
    countTokens: z.strictObject(common),
  };
}

type Schemas = ReturnType<typeof anthropicRequestSchemas>;
/** A parsed `POST /v1/messages` body. */
export type MessagesRequest = z.infer<Schemas["create"]>;
/** A parsed `POST /v1/messages/count_tokens` body. */
export type CountTokensRequest = z.infer<Schemas["countTokens"]>;
type ContentBlockParam = Exclude<MessagesRequest["messages"][number]["content"], string>[number];

/** Hints for top-level fields of Anthropic's API that nexrl refuses. */
const REFUSED_FIELDS: Record<string, string> = {
  container: "code execution containers run at Anthropic",
  mcp_servers: "MCP connectors run at Anthropic; call MCP tools from the agent",
  output_config: "structured outputs and effort are not enforced on sampling",
  context_management: "the conversation is rendered as sent",
};

/**
 * The issue to report of a failed union (`content` as a string or blocks): that of the branch
 * that got furthest into the input, its path from the root.
 */
function specificIssue(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  const branches = issue.errors
    .filter((branch) => branch.length > 0)
    .map((branch) => specificIssue({ ...branch[0]!, path: [...issue.path, ...branch[0]!.path] }));
  const deepest = branches.sort((a, b) => b.path.length - a.path.length)[0];
  return deepest && deepest.path.length > issue.path.length ? deepest : issue;
}

/**
 * Parses `body` with `schema`.
 * @throws {@link ProtocolError} 400 naming the first field at fault (`messages[0].content[1]`), unsupported fields by name.
 */
export function parseAnthropicRequest<T>(schema: z.ZodType<T>, body: unknown, server: string): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = specificIssue(result.error.issues[0]!);
  const path = issue.path
    .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
    .join("")
    .replace(/^\./, "");
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    const hints = issue.keys.map((k) => REFUSED_FIELDS[k]).filter((h) => h !== undefined);
    message = `${issue.keys.join(", ")} ${issue.keys.length > 1 ? "are" : "is"} not supported by ${server}${hints.length > 0 ? ` (${hints.join("; ")})` : ""}; leave ${issue.keys.length > 1 ? "them" : "it"} out`;
  }
  throw new ProtocolError(path ? `${path}: ${message}` : message, { status: 400, ...INVALID });
}

/** How a tool_use block's `input` is written as a {@link ToolCall}'s JSON arguments. */
export type ToolArguments = (use: { id: string; name: string; input: Record<string, unknown> }) => string;

/** `input` as compact JSON, as a model is answered when nothing better is known. */
export const jsonArguments: ToolArguments = ({ input }) => JSON.stringify(input);

function joinedText(content: string | ReadonlyArray<{ text: string }> | undefined): string {
  return typeof content === "string" ? content : (content ?? []).map((b) => b.text).join("");
}

/**
 * The conversation of a request as {@link ChatMessage}s: `system` first; a user turn's
 * `tool_result` blocks become `tool` messages (`is_error` results read `Error: …`) and its text
 * blocks user messages, in their order; an assistant turn's text blocks its content, its
 * `tool_use` blocks its `tool_calls` (arguments written by `argumentsOf`). Thinking blocks of
 * earlier turns are not rendered as text, as Anthropic drops them from the context; an assistant
 * turn sampled by the gateway comes back as its sampled tokens, thinking included.
 * @throws {@link ProtocolError} 400 for a conversation ending in an assistant turn (a prefill).
 */
export function anthropicMessages(
  request: Pick<MessagesRequest, "system" | "messages">,
  argumentsOf: ToolArguments = jsonArguments,
): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (request.system !== undefined) out.push({ role: "system", content: joinedText(request.system) });
  const toolNames = new Map<string, string>();
  for (const message of request.messages) {
    const blocks: ContentBlockParam[] =
      typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
    if (message.role === "assistant") out.push(assistantMessage(blocks, argumentsOf, toolNames));
    else appendAll(out, userMessages(blocks, toolNames));
  }
  if (request.messages.at(-1)!.role === "assistant")
    throw new ProtocolError(
      "messages: a conversation ending in an assistant turn (a prefill) is not supported; end with a user turn",
      { status: 400, ...INVALID },
    );
  return out;
}

function assistantMessage(
  blocks: readonly ContentBlockParam[],
  argumentsOf: ToolArguments,
  toolNames: Map<string, string>,
): ChatMessage {
  let content = "";
  const calls: ToolCall[] = [];
  for (const block of blocks) {
    if (block.type === "text") content += block.text;
    else if (block.type === "tool_use") {
      toolNames.set(block.id, block.name);
      calls.push({ id: block.id, type: "function", function: { name: block.name, arguments: argumentsOf(block) } });
    } else if (block.type === "tool_result")
      throw new ProtocolError("messages: tool_result blocks belong in user turns", { status: 400, ...INVALID });
  }
  return { role: "assistant", content, ...(calls.length > 0 && { tool_calls: calls }) };
}

function userMessages(blocks: readonly ContentBlockParam[], toolNames: ReadonlyMap<string, string>): ChatMessage[] {
  const out: ChatMessage[] = [];
  let text: string | undefined;
  const flush = () => {
    if (text !== undefined) out.push({ role: "user", content: text });
    text = undefined;
  };
  for (const block of blocks) {
    if (block.type === "text") text = (text ?? "") + block.text;
    else if (block.type === "tool_result") {
      flush();
      const result = joinedText(block.content);
      const name = toolNames.get(block.tool_use_id);
      out.push({
        role: "tool",
        content: block.is_error === true ? `Error: ${result}` : result,
        tool_call_id: block.tool_use_id,
        ...(name !== undefined && { name }),
      });
    } else
      throw new ProtocolError(`messages: ${block.type} blocks belong in assistant turns`, { status: 400, ...INVALID });
  }
  flush();
  return out;
}

/** The tools of a request, as the chat template takes them. */
export function anthropicTools(request: Pick<MessagesRequest, "tools">): ToolDefinition[] | undefined {
  return request.tools?.map((t) => ({
    type: "function",
    function: {
      name: t.name,
      ...(t.description !== undefined && { description: t.description }),
      parameters: t.input_schema,
    },
  }));
}

/** The chat template variables a request's `thinking` sets: `enable_thinking`, where the template reads it. */
export function thinkingKwargs(request: Pick<MessagesRequest, "thinking">): Record<string, unknown> | undefined {
  if (request.thinking === undefined) return undefined;
  return { enable_thinking: request.thinking.type !== "disabled" };
}

// ---------------------------------------------------------------------------------------------
// Answers

/** A `tool_use` id as Anthropic writes them: `toolu_` and 24 random characters. */
export function newToolUseId(): string {
  return `toolu_${randomBytes(18).toString("base64url")}`;
}

/** A message id: `msg_` and 24 random characters. */
export function newMessageId(): string {
  return `msg_${randomBytes(18).toString("base64url")}`;
}

/** Why a message ended, as Anthropic writes it. */
function stopReason(choice: GeneratedChoice): "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" {
  if (choice.toolCalls?.length) return "tool_use";
  if (choice.finishReason === "length") return "max_tokens";
  return choice.stopReason !== null ? "stop_sequence" : "end_turn";
}

/**
 * The signature of a thinking block: a digest of its text. It marks the block as nexrl's; it is
 * not a secret and proves nothing to anyone else.
 */
function signature(thinking: string): string {
  return createHash("sha256").update(thinking).digest("base64url");
}

/** A tool call's arguments as the `input` object of a tool_use block (`{}` for arguments that are not a JSON object). */
function toolInput(call: ToolCall): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(call.function.arguments);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Parsed tool calls hold JSON; anything else has no input to give.
  }
  return {};
}

/** The content blocks of a choice: its thinking (when reasoning was split out), its text, its tool calls. */
function contentBlocks(choice: GeneratedChoice) {
  const blocks: Array<
    | { type: "thinking"; thinking: string; signature: string }
    | { type: "text"; text: string; citations: null }
    | { type: "tool_use"; id: string; name: string; input: Record<string, unknown>; caller: { type: "direct" } }
  > = [];
  if (choice.reasoning !== undefined)
    blocks.push({ type: "thinking", thinking: choice.reasoning, signature: signature(choice.reasoning) });
  const calls = choice.toolCalls ?? [];
  if (choice.text !== "" || calls.length === 0) blocks.push({ type: "text", text: choice.text, citations: null });
  for (const call of calls)
    blocks.push({
      type: "tool_use",
      id: call.id,
      name: call.function.name,
      input: toolInput(call),
      caller: { type: "direct" },
    });
  return blocks;
}

function usage(inputTokens: number, outputTokens: number) {
  return {
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    cache_creation: null,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: null,
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: null,
    speed: null,
  };
}

/** How a message is answered: its id and the model name echoed back. */
export interface MessageFormat {
  /** The message id (`msg_…`). */
  id: string;
  /** The model name of the request. */
  model: string;
}

/** The body of a `/v1/messages` answer: a `Message`. */
export function messageBody(format: MessageFormat, prompt: readonly number[], choice: GeneratedChoice) {
  return {
    id: format.id,
    type: "message" as const,
    role: "assistant" as const,
    model: format.model,
    content: contentBlocks(choice),
    stop_reason: stopReason(choice),
    stop_sequence: choice.toolCalls?.length ? null : choice.stopReason,
    stop_details: null,
    container: null,
    diagnostics: null,
    usage: usage(prompt.length, choice.tokens.length),
  };
}

/** One server-sent event of a streamed answer: its `event:` name and `data:` object. */
export interface AnthropicEvent {
  /** The event name, which is also `data.type`. */
  event: string;
  /** The event's JSON. */
  data: { type: string } & Record<string, unknown>;
}

/**
 * The server-sent events of a streamed `/v1/messages` answer: `message_start`, `ping`, each
 * content block's `content_block_start`, deltas (`thinking_delta` and `signature_delta`,
 * `text_delta` one token's text at a time when the text is all the answer holds,
 * `input_json_delta` with a tool call's arguments) and `content_block_stop`, then
 * `message_delta` with the stop reason and usage, and `message_stop`.
 */
export function messageEvents(
  format: MessageFormat,
  prompt: readonly number[],
  choice: GeneratedChoice,
  tokenizer: Tokenizer,
): AnthropicEvent[] {
  const body = messageBody(format, prompt, choice);
  const event = (data: AnthropicEvent["data"]): AnthropicEvent => ({ event: data.type, data });
  const events: AnthropicEvent[] = [
    event({
      type: "message_start",
      message: { ...body, content: [], stop_reason: null, stop_sequence: null, usage: usage(prompt.length, 0) },
    }),
    event({ type: "ping" }),
  ];
  const onlyText = choice.reasoning === undefined && !choice.toolCalls?.length;
  body.content.forEach((block, index) => {
    const delta = (d: Record<string, unknown>) => event({ type: "content_block_delta", index, delta: d });
    switch (block.type) {
      case "thinking":
        events.push(
          event({ type: "content_block_start", index, content_block: { ...block, thinking: "", signature: "" } }),
          delta({ type: "thinking_delta", thinking: block.thinking }),
          delta({ type: "signature_delta", signature: block.signature }),
        );
        break;
      case "text": {
        events.push(event({ type: "content_block_start", index, content_block: { ...block, text: "" } }));
        const pieces = onlyText ? textPieces(tokenizer, choice) : [block.text];
        for (const text of pieces) if (text !== "") events.push(delta({ type: "text_delta", text }));
        break;
      }
      case "tool_use": {
        const call = choice.toolCalls!.find((c) => c.id === block.id)!;
        events.push(
          event({ type: "content_block_start", index, content_block: { ...block, input: {} } }),
          delta({ type: "input_json_delta", partial_json: call.function.arguments }),
        );
        break;
      }
    }
    events.push(event({ type: "content_block_stop", index }));
  });
  events.push(
    event({
      type: "message_delta",
      delta: { stop_reason: body.stop_reason, stop_sequence: body.stop_sequence, stop_details: null, container: null },
      usage: {
        input_tokens: body.usage.input_tokens,
        output_tokens: body.usage.output_tokens,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
        output_tokens_details: null,
        server_tool_use: null,
      },
    }),
    event({ type: "message_stop" }),
  );
  return events;
}

/** Writes server-sent events with their `event:` and `data:` lines. */
export function sendAnthropicEvents(res: ServerResponse, events: readonly AnthropicEvent[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const { event, data } of events) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  res.end();
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Anthropic's `error.type` of an HTTP status. */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
    case 410:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

/**
 * Answers `error` in Anthropic's shape `{ type: "error", error: { type, message } }` (or drops
 * the connection when a stream has begun).
 */
export function sendAnthropicError(
  res: ServerResponse,
  error: ProtocolError,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(
    res,
    error.status,
    { type: "error", error: { type: anthropicErrorType(error.status), message: error.message } },
    headers,
  );
}
