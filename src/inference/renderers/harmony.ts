/**
 * gpt-oss's Harmony format (openai/harmony, docs/format.md): `<|start|>{role}<|message|>…<|end|>`
 * messages, the assistant's analysis / commentary / final channels, tool calls addressed
 * `to=functions.NAME` with `<|constrain|>json` and ended by `<|call|>`, the final answer ended by
 * `<|return|>`.
 *
 * @module
 */
import type { ChatMessage, ChatTemplateOptions, ToolCall } from "../../wire/tokenizer.js";
import { InputError } from "../../errors.js";
import { harmonyToolsSection } from "./harmony-tools.js";
import { isSampledCompletion, toolCallsOf } from "./sampled.js";
import { renderKwargs, type ChatRenderer } from "./types.js";

const END = "<|end|>";
const CALL = "<|call|>";
const RETURN = "<|return|>";

const message = (header: string, content: string, end = END): string => `<|start|>${header}<|message|>${content}${end}`;

const EFFORTS = ["low", "medium", "high"] as const;

function stringKwarg(kwargs: Readonly<Record<string, unknown>>, key: string, fallback?: string): string | undefined {
  const value = kwargs[key] ?? fallback;
  if (value !== undefined && typeof value !== "string")
    throw new InputError(`chat_template_kwargs.${key} must be a text`);
  return value;
}

/** The system message: identity, dates, reasoning effort and the valid channels. */
function systemMessage(options: ChatTemplateOptions, hasTools: boolean): string {
  const kwargs = renderKwargs("gpt_oss", options, [
    "reasoning_effort",
    "model_identity",
    "knowledge_cutoff",
    "current_date",
  ]);
  const effort = stringKwarg(kwargs, "reasoning_effort", "medium")!;
  if (!(EFFORTS as readonly string[]).includes(effort))
    throw new InputError(`chat_template_kwargs.reasoning_effort must be one of ${EFFORTS.join(", ")}, not "${effort}"`);
  const top = [
    stringKwarg(kwargs, "model_identity", "You are ChatGPT, a large language model trained by OpenAI.")!,
    `Knowledge cutoff: ${stringKwarg(kwargs, "knowledge_cutoff", "2024-06")!}`,
  ];
  const date = stringKwarg(kwargs, "current_date");
  if (date !== undefined) top.push(`Current date: ${date}`);
  let channels = "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (hasTools) channels += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return message("system", [top.join("\n"), `Reasoning: ${effort}`, channels].join("\n\n"));
}

function toolCall(call: ToolCall): string {
  return message(
    `assistant<|channel|>commentary to=functions.${call.function.name} <|constrain|>json`,
    call.function.arguments,
    CALL,
  );
}

/** The function a tool message answers: its `name`, or the call its `tool_call_id` names. */
function toolName(tool: ChatMessage, earlier: readonly ChatMessage[]): string {
  if (tool.name) return tool.name;
  for (const m of earlier) {
    const call = toolCallsOf(m).find((c) => c.id === tool.tool_call_id);
    if (call) return call.function.name;
  }
  throw new InputError(
    `a tool message (tool_call_id ${JSON.stringify(tool.tool_call_id)}) answers no earlier tool call; Harmony addresses tool results from the function, so give its name or a matching tool_call_id`,
  );
}

/**
 * Renders gpt-oss conversations in Harmony:
 * - the system message (identity, `Knowledge cutoff`, optional `Current date`, `Reasoning:
 *   low|medium|high`, `# Valid channels: …`, and the line sending function calls to the
 *   commentary channel when there are tools);
 * - a developer message with the leading system/developer prompts as `# Instructions` and the
 *   tools as `namespace functions { … }`;
 * - each assistant message as its analysis (`reasoning_content`), then its content (on
 *   `commentary` when it also calls tools, a preamble; on `final` otherwise), then one
 *   `commentary to=functions.NAME <|constrain|>json` message per call, ended by `<|call|>`;
 * - tool results from `functions.NAME to=assistant` on the commentary channel.
 *
 * As the format guide says, the analysis of earlier turns is dropped: only assistant messages
 * after the last user message keep theirs (an ongoing chain of tool calls keeps its chain of
 * thought). A conversation that ends with a final answer and no generation prompt (a training
 * target) ends with `<|return|>`, the token the model stops with; elsewhere `<|end|>` closes
 * messages, as stored history should. `chatTemplateKwargs`: `reasoning_effort`,
 * `model_identity`, `knowledge_cutoff`, `current_date`.
 */
export class HarmonyRenderer implements ChatRenderer {
  readonly id = "gpt_oss";
  readonly specialTokens = ["<|start|>", "<|message|>", END, "<|channel|>", "<|constrain|>", CALL, RETURN];
  readonly turnEnds = [CALL, RETURN];

  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const tools = options.tools ?? [];
    let out = systemMessage(options, tools.length > 0);
    let start = 0;
    const instructions: string[] = [];
    while (messages[start]?.role === "system" || messages[start]?.role === "developer")
      instructions.push(messages[start++]!.content);
    const developer = [
      ...(instructions.length > 0 ? ["# Instructions", instructions.join("\n\n")] : []),
      ...(tools.length > 0 ? [harmonyToolsSection(tools)] : []),
    ];
    if (developer.length > 0) out += message("developer", developer.join("\n\n"));
    const lastUser = messages.findLastIndex((m) => m.role === "user");
    let endsFinal = false;
    for (let i = start; i < messages.length; i++) {
      const m = messages[i]!;
      endsFinal = false;
      if (m.role === "user") out += message("user", m.content);
      else if (m.role === "tool")
        out += message(`functions.${toolName(m, messages.slice(0, i))} to=assistant<|channel|>commentary`, m.content);
      else if (m.role === "assistant" && isSampledCompletion(m)) out += "<|start|>assistant" + m.content;
      else if (m.role === "assistant") {
        const calls = m.tool_calls ?? [];
        if (m.reasoning_content && i > lastUser) out += message("assistant<|channel|>analysis", m.reasoning_content);
        if (m.content !== "")
          out += message(`assistant<|channel|>${calls.length > 0 ? "commentary" : "final"}`, m.content);
        out += calls.map(toolCall).join("");
        endsFinal = calls.length === 0 && m.content !== "";
      } else {
        throw new InputError(
          `Harmony has no "${m.role}" message here: system and developer prompts come first, then user, assistant and tool messages`,
        );
      }
    }
    if (options.addGenerationPrompt) return out + "<|start|>assistant";
    return endsFinal ? out.slice(0, -END.length) + RETURN : out;
  }
}
