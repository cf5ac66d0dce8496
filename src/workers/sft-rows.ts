/**
 * The rows the `sft` worker trains on, read and checked: OpenAI's fine-tuning format (`messages`,
 * optional `tools` and per-message `weight`) and `prompt`/`completion` rows.
 * @module
 */
import type { ChatMessage, ToolCall, ToolDefinition } from "../wire/tokenizer.js";
import type { WorkerSettings } from "../contracts/worker.js";
import { appendAll } from "../wire/arrays.js";
import { InputError } from "../errors.js";

/** Which assistant messages of a `messages` row are trained when they carry no `weight` (`rollout_worker.sft.train_on`). */
export type SftTrainOn = WorkerSettings["sft"]["trainOn"];

/** A conversation to render with the chat template, with the messages to train on. */
export interface ChatExample {
  /** A `messages` row, or a `prompt`/`completion` row whose prompt is chat messages. */
  readonly kind: "chat";
  /** The whole conversation, prompt and completion, in OpenAI's message shape (content always text). */
  readonly messages: ChatMessage[];
  /** Per message: whether its tokens are trained (only assistant messages can be). */
  readonly trained: boolean[];
  /** The row's `tools`, given to the chat template. */
  readonly tools: ToolDefinition[] | undefined;
}

/** A text prompt and its text completion, trained as plain text (no chat template). */
export interface TextExample {
  /** A `prompt`/`completion` row with text in both. */
  readonly kind: "text";
  /** The prompt text. */
  readonly prompt: string;
  /** The completion text. */
  readonly completion: string;
}

/** One row of the `sft` worker, checked. */
export type SftExample = ChatExample | TextExample;

/** The roles a message of an `sft` row may have. */
const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** What an `sft` row looks like, for error messages. */
const ROW_SHAPES =
  'sft rows look like {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]} or {"prompt": "...", "completion": "..."}';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A checked tool call of an assistant message, in OpenAI's shape. */
function toolCallOf(value: unknown, where: string): ToolCall {
  const fn = isObject(value) ? value.function : undefined;
  if (!isObject(value) || !isObject(fn) || typeof fn.name !== "string" || fn.name === "")
    throw new InputError(
      `${where} must look like {"id": "call_1", "type": "function", "function": {"name": "...", "arguments": "{...}"}}`,
    );
  if (typeof fn.arguments !== "string")
    throw new InputError(
      `${where}.function.arguments must be the arguments as a JSON text (OpenAI's format), got ${JSON.stringify(fn.arguments)?.slice(0, 60)}`,
    );
  if (value.type !== undefined && value.type !== "function")
    throw new InputError(`${where}.type must be "function", got ${JSON.stringify(value.type)}`);
  return {
    id: typeof value.id === "string" ? value.id : "",
    type: "function",
    function: { name: fn.name, arguments: fn.arguments },
  };
}

/**
 * One message of a row, checked, as a {@link ChatMessage} (an assistant message that only calls
 * tools gets content `""`), and its `weight` when it has one.
 */
function messageOf(value: unknown, where: string): { message: ChatMessage; weight: 0 | 1 | undefined } {
  if (!isObject(value)) throw new InputError(`${where} must be an object {"role": ..., "content": ...}`);
  const role = value.role;
  if (typeof role !== "string" || !ROLES.has(role))
    throw new InputError(
      `${where}.role must be one of ${[...ROLES].join(", ")}, got ${JSON.stringify(role)?.slice(0, 40)}`,
    );
  const calls = value.tool_calls;
  if (calls !== undefined && (role !== "assistant" || !Array.isArray(calls)))
    throw new InputError(`${where}.tool_calls must be a list, and only assistant messages make tool calls`);
  const toolCalls = (calls ?? []).map((call: unknown, i: number) => toolCallOf(call, `${where}.tool_calls[${i}]`));
  const content = value.content;
  if (typeof content !== "string" && !((content === null || content === undefined) && toolCalls.length > 0))
    throw new InputError(
      `${where}.content must be text${role === "assistant" ? " (or null when the message has tool_calls)" : ""}, got ${JSON.stringify(content)?.slice(0, 60)}`,
    );
  const weight = value.weight;
  if (weight !== undefined && weight !== 0 && weight !== 1)
    throw new InputError(`${where}.weight must be 0 or 1, got ${JSON.stringify(weight)}`);
  if (weight !== undefined && role !== "assistant")
    throw new InputError(
      `${where}.weight is set on a ${role} message; only assistant messages are trained, so only they take a weight`,
    );
  const message: ChatMessage = { role, content: typeof content === "string" ? content : "" };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  if (typeof value.tool_call_id === "string") message.tool_call_id = value.tool_call_id;
  if (typeof value.name === "string") message.name = value.name;
  return { message, weight };
}

/** The row's `tools`, checked, or undefined when it has none. */
function toolsOf(value: unknown, where: string): ToolDefinition[] | undefined {
  if (value === undefined || value === null) return undefined;
  const shape = `{"type": "function", "function": {"name": "...", "description": "...", "parameters": {...}}}`;
  if (!Array.isArray(value)) throw new InputError(`${where}: "tools" must be a list of ${shape}`);
  return value.map((tool: unknown, i) => {
    const fn = isObject(tool) ? tool.function : undefined;
    if (!isObject(tool) || tool.type !== "function" || !isObject(fn) || typeof fn.name !== "string")
      throw new InputError(`${where}: tools[${i}] must look like ${shape}`);
    return tool as unknown as ToolDefinition;
  });
}

/** The messages of a list field, checked; `weights` receives each message's `weight`. */
function messagesOf(value: unknown[], field: string, where: string, weights: Array<0 | 1 | undefined>): ChatMessage[] {
  return value.map((m, i) => {
    const { message, weight } = messageOf(m, `${where}: ${field}[${i}]`);
    weights.push(weight);
    return message;
  });
}

/**
 * Reads one row of the `sft` worker. The row's prompt field (`data.prompt_key`) holds either
 * - a list of chat messages and no `completion`: OpenAI's fine-tuning format. Assistant messages
 *   with `weight: 1` are trained, those with `weight: 0` are not, and those without a weight
 *   follow `trainOn` (every assistant message, or the last one only);
 * - chat messages and a `completion` (a text, read as one assistant message, or a list of
 *   messages): the completion's assistant messages are trained (`weight: 0` leaves one out);
 * - a text and a text `completion`: the completion is trained, as plain text after the prompt.
 *
 * `tools` (OpenAI's tool definitions) go to the chat template with the messages.
 * @param row the row's fields.
 * @param promptKey `data.prompt_key`.
 * @param where how messages name the row (`row 4`).
 * @throws {@link "nexrl/errors".InputError | InputError} naming the row and the field for anything else, and for a row with
 *   no message to train on.
 */
export function readSftRow(
  row: Readonly<Record<string, unknown>>,
  promptKey: string,
  trainOn: SftTrainOn,
  where: string,
): SftExample {
  const prompt = row[promptKey];
  const completion = row.completion;
  if (typeof prompt === "string") {
    if (typeof completion !== "string")
      throw new InputError(
        `${where}: its prompt "${promptKey}" is text, so it needs a text field "completion" to train on (got ${completion === undefined ? "none" : JSON.stringify(completion).slice(0, 60)}); ${ROW_SHAPES}`,
      );
    if (row.tools !== undefined)
      throw new InputError(
        `${where}: "tools" needs chat messages (the chat template describes them); a text prompt and completion are trained as plain text`,
      );
    return { kind: "text", prompt, completion };
  }
  if (!Array.isArray(prompt) || prompt.length === 0)
    throw new InputError(
      `${where}: its prompt field "${promptKey}" (data.prompt_key) must be a non-empty list of chat messages or a text; ${ROW_SHAPES}`,
    );
  const weights: Array<0 | 1 | undefined> = [];
  const messages = messagesOf(prompt, promptKey, where, weights);
  const tools = toolsOf(row.tools, where);
  let trained: boolean[];
  if (completion === undefined) {
    const last = messages.map((m) => m.role).lastIndexOf("assistant");
    trained = messages.map(
      (m, i) =>
        m.role === "assistant" &&
        (weights[i] === undefined ? trainOn === "all_assistant_messages" || i === last : weights[i] === 1),
    );
  } else {
    const prompted = messages.length;
    const weighted = weights.findIndex((w) => w !== undefined);
    if (weighted >= 0)
      throw new InputError(
        `${where}: ${promptKey}[${weighted}].weight is set, but the prompt of a prompt/completion row is never trained; weigh the messages of "completion"`,
      );
    if (typeof completion === "string") {
      messages.push({ role: "assistant", content: completion });
      weights.push(undefined);
    } else if (Array.isArray(completion) && completion.length > 0) {
      appendAll(messages, messagesOf(completion, "completion", where, weights));
    } else {
      throw new InputError(
        `${where}: "completion" must be a text or a non-empty list of chat messages, got ${JSON.stringify(completion)?.slice(0, 60)}`,
      );
    }
    trained = messages.map((m, i) => i >= prompted && m.role === "assistant" && weights[i] !== 0);
  }
  if (!trained.includes(true))
    throw new InputError(
      `${where} has no assistant message to train on${messages.some((m) => m.role === "assistant") ? " (each has weight 0, or rollout_worker.sft.train_on leaves it out)" : ""}; add the assistant's answer`,
    );
  return { kind: "chat", messages, trained, tools };
}
