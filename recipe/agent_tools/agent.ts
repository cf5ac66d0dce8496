/**
 * The agent of the agent_tools recipe, written with the plain `openai` package and nothing of
 * nexrl: it answers a question by chatting with the model, offering two tools (`get` for an
 * animal's secret code, `calc` for arithmetic), running the calls the model makes and sending
 * their results back, until the model answers without calling a tool (at most 3 turns).
 *
 * nexrl calls it once per episode with the task and the episode's gateway address; any agent that
 * takes an OpenAI base URL could be trained the same way.
 */
import OpenAI from "openai";
import { calc } from "./agent_workspace/tools/calc.js";
import { get } from "./agent_workspace/tools/get.js";

const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get",
      description: "The secret code of an animal.",
      parameters: { type: "object", properties: { k: { type: "string" } }, required: ["k"] },
    },
  },
  {
    type: "function",
    function: {
      name: "calc",
      description: "Evaluates an integer expression with + - * and parentheses.",
      parameters: { type: "object", properties: { e: { type: "string" } }, required: ["e"] },
    },
  },
];

const RUN: Record<string, (args: Record<string, unknown>) => string> = { get, calc };

/** Runs one tool call; problems become the tool's answer, so that the model can see them. */
function runTool(call: OpenAI.ChatCompletionMessageFunctionToolCall): string {
  const tool = RUN[call.function.name];
  if (!tool) return `unknown tool ${call.function.name}`;
  try {
    return tool(JSON.parse(call.function.arguments) as Record<string, unknown>);
  } catch (error) {
    return `error: ${(error as Error).message}`;
  }
}

/** One episode: the final answer and the conversation. */
export default async function toolAgent(
  task: { prompt: unknown },
  { baseURL, model, signal }: { baseURL: string; model: string; signal: AbortSignal },
): Promise<{ final_answer: string; history: OpenAI.ChatCompletionMessageParam[]; truncated?: boolean }> {
  const openai = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
  const history: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: String(task.prompt) }];
  for (let turn = 0; turn < 3; turn++) {
    const completion = await openai.chat.completions.create({ model, messages: history, tools: TOOLS }, { signal });
    const message = completion.choices[0]!.message;
    const calls = (message.tool_calls ?? []).filter((call) => call.type === "function");
    history.push({ role: "assistant", content: message.content, ...(calls.length > 0 && { tool_calls: calls }) });
    if (calls.length === 0) return { final_answer: (message.content ?? "").trim(), history };
    for (const call of calls) history.push({ role: "tool", tool_call_id: call.id, content: runTool(call) });
  }
  return { final_answer: "", history, truncated: true };
}
