/**
 * Llama 3.1–3.3 Instruct, with tools: the format of Meta's own chat template for these models
 * (tokenizer_config.json of meta-llama/Llama-3.1-8B-Instruct, the same for 3.3) and of the
 * Llama 3.1 model card's JSON tool calling, for tokenizers that ship only a basic template.
 *
 * @module
 */
import type { ChatMessage, ChatTemplateOptions, ToolCall } from "../../wire/tokenizer.js";
import { InputError } from "../../errors.js";
import { pythonJson } from "./py-json.js";
import { isSampledCompletion } from "./sampled.js";
import { renderKwargs, type ChatRenderer } from "./types.js";

const BOS = "<|begin_of_text|>";
const EOT = "<|eot_id|>";
/** Ends a message after which the model expects a tool's output (`ipython` mode, built-in tools). */
const EOM = "<|eom_id|>";
const PYTHON_TAG = "<|python_tag|>";

const header = (role: string): string => `<|start_header_id|>${role}<|end_header_id|>\n\n`;

/** The date the template writes when none is given (`date_string`). */
const DEFAULT_DATE = "26 Jul 2024";

/** The instruction in front of the tool definitions (the template's words, including its missing space). */
const CALL_FORMAT =
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n';

function kwargs(options: ChatTemplateOptions): { toolsInUser: boolean; date: string; builtinTools?: string[] } {
  const k = renderKwargs("llama3", options, ["tools_in_user_message", "date_string", "builtin_tools"]);
  const toolsInUser = k.tools_in_user_message ?? true;
  const date = k.date_string ?? DEFAULT_DATE;
  const builtin = k.builtin_tools;
  if (typeof toolsInUser !== "boolean")
    throw new InputError("chat_template_kwargs.tools_in_user_message must be true or false");
  if (typeof date !== "string")
    throw new InputError('chat_template_kwargs.date_string must be a text like "26 Jul 2024"');
  if (builtin !== undefined && !(Array.isArray(builtin) && builtin.every((t) => typeof t === "string")))
    throw new InputError('chat_template_kwargs.builtin_tools must be a list of names such as ["brave_search"]');
  return { toolsInUser, date, ...(builtin !== undefined && { builtinTools: builtin as string[] }) };
}

function parseArguments(call: ToolCall): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(call.function.arguments);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // refused below
  }
  throw new InputError(
    `the arguments of tool call ${call.id} (${call.function.name}) are not a JSON object: ${call.function.arguments}`,
  );
}

/** An assistant message that calls a tool: JSON for custom tools, `<|python_tag|>name.call(…)` for built-in ones. */
function toolCallMessage(message: ChatMessage, builtinTools: readonly string[] | undefined): string {
  const calls = message.tool_calls ?? [];
  if (calls.length !== 1) {
    throw new InputError(
      `Llama 3 calls one tool per message; this assistant message has ${calls.length} tool calls: send them as separate messages`,
    );
  }
  const call = calls[0]!;
  const args = parseArguments(call);
  const body = builtinTools?.includes(call.function.name)
    ? `${PYTHON_TAG}${call.function.name}.call(${Object.entries(args)
        .map(([name, value]) => `${name}="${typeof value === "string" ? value : pythonJson(value)}"`)
        .join(", ")})`
    : `{"name": "${call.function.name}", "parameters": ${pythonJson(args)}}`;
  return header("assistant") + body + (builtinTools === undefined ? EOT : EOM);
}

/**
 * Renders Llama 3.1–3.3 conversations as Meta's chat template does:
 * - a system message always, with `Environment: ipython` when tools are given (and
 *   `Tools: …` for `builtin_tools`), the knowledge and today dates, then the system prompt;
 * - the tools as JSON (indent 4) with the call instructions in the first user message
 *   (`tools_in_user_message`, the default) or in the system message;
 * - an assistant tool call as `{"name": …, "parameters": {…}}` ending with `<|eot_id|>` (one call
 *   per message, as the template requires), or `<|python_tag|>name.call(…)` and `<|eom_id|>` for a
 *   built-in tool;
 * - tool results in the `ipython` role, written with `tojson` as the template does (a text
 *   result is written as a JSON string);
 * - the content of a message that also calls a tool is not written (the template drops it).
 *
 * `chatTemplateKwargs`: `tools_in_user_message`, `date_string`, `builtin_tools`.
 */
export class Llama3Renderer implements ChatRenderer {
  readonly id = "llama3";
  readonly specialTokens = [BOS, "<|start_header_id|>", "<|end_header_id|>", EOT, EOM, PYTHON_TAG];
  readonly turnEnds = [EOT, EOM];

  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const { toolsInUser, date, builtinTools } = kwargs(options);
    const tools = options.tools?.length ? options.tools : undefined;
    let rest = [...messages];
    let system = "";
    if (rest[0]?.role === "system") {
      system = rest[0].content.trim();
      rest = rest.slice(1);
    }
    const toolList = (tools ?? []).map((t) => pythonJson(t, 4) + "\n\n").join("");
    let out = BOS + header("system");
    if (builtinTools !== undefined || tools) out += "Environment: ipython\n";
    if (builtinTools !== undefined)
      out += `Tools: ${builtinTools.filter((t) => t !== "code_interpreter").join(", ")}\n\n`;
    out += `Cutting Knowledge Date: December 2023\nToday Date: ${date}\n\n`;
    if (tools && !toolsInUser) {
      out +=
        "You have access to the following functions. To call a function, please respond with JSON for a function call." +
        CALL_FORMAT +
        toolList;
    }
    out += system + EOT;
    if (tools && toolsInUser) {
      const first = rest[0];
      if (!first) throw new InputError("Llama 3 puts the tools in the first user message, and there is none");
      rest = rest.slice(1);
      out +=
        header("user") +
        "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
        CALL_FORMAT +
        toolList +
        first.content.trim() +
        EOT;
    }
    for (const message of rest) {
      if (message.role === "assistant" && isSampledCompletion(message)) out += header("assistant") + message.content;
      else if (message.role === "tool" || message.role === "ipython")
        out += header("ipython") + pythonJson(message.content) + EOT;
      else if (message.tool_calls?.length) out += toolCallMessage(message, builtinTools);
      else out += header(message.role) + message.content.trim() + EOT;
    }
    if (options.addGenerationPrompt) out += header("assistant");
    return out;
  }
}
