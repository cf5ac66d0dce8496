/**
 * The built-in tool-calling loop that runs a declarative agent through the gateway.
 * @module
 */
import type OpenAI from "openai";
import type { RolloutTask } from "../../contracts/task.js";
import type { AgentFunction } from "../../contracts/agent.js";
import type { AgentTool, DeclarativeAgentConfig, ToolContext } from "./config.js";
import { NexrlError } from "../../errors.js";

type Message = OpenAI.ChatCompletionMessageParam;

/** The system prompt of one episode: the template rendered with `date` (YYYY-MM-DD), `task_name` and the task's row fields. */
function systemPrompt(
  config: DeclarativeAgentConfig,
  task: RolloutTask,
  taskName: string | undefined,
): string | undefined {
  const prompt = config.systemPrompt;
  if (prompt === undefined || typeof prompt === "string") return prompt;
  return prompt.render({
    ...task.data,
    date: new Date().toISOString().slice(0, 10),
    ...(taskName !== undefined && { task_name: taskName }),
  });
}

/** The opening messages: text as a user message, chat messages as they are. */
function openingMessages(task: RolloutTask): Message[] {
  const { prompt } = task;
  return typeof prompt === "string" ? [{ role: "user", content: prompt }] : (prompt as Message[]);
}

/** The sampling fields of a chat call, as OpenAI's request body spells them. */
function samplingFields({ temperature, maxTokens, topP, stop }: DeclarativeAgentConfig["llm"]) {
  return {
    ...(temperature !== undefined && { temperature }),
    ...(maxTokens !== undefined && { max_tokens: maxTokens }),
    ...(topP !== undefined && { top_p: topP }),
    ...(stop !== undefined && { stop }),
  };
}

/** Runs one tool call; problems become the tool's answer so that the model can see them. */
async function runTool(
  tools: readonly AgentTool[],
  call: { name: string; arguments: string },
  context: ToolContext,
): Promise<string> {
  const tool = tools.find((t) => t.definition.function.name === call.name);
  if (!tool)
    return `error: unknown tool "${call.name}"; the tools are ${tools.map((t) => t.definition.function.name).join(", ") || "none"}`;
  let args: unknown;
  try {
    args = JSON.parse(call.arguments || "{}");
  } catch (error) {
    return `error: the arguments are not valid JSON (${(error as Error).message})`;
  }
  if (typeof args !== "object" || args === null || Array.isArray(args))
    return "error: the arguments must be a JSON object";
  try {
    const result = await tool.run(args as Record<string, unknown>, context);
    return typeof result === "string" ? result : JSON.stringify(result);
  } catch (error) {
    return `error: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/**
 * An {@link AgentFunction} running `config`: the system prompt and the task's prompt, then up to
 * `maxTurns` chat calls; each reply's tool calls are run and answered with `tool` messages, and a
 * reply without tool calls is the final answer. Returns `{ final_answer, history }`, with
 * `truncated: true` when the turns ran out first.
 */
export function declarativeAgent(config: DeclarativeAgentConfig, taskName?: string): AgentFunction {
  const tools = config.tools.map((t) => t.definition) as OpenAI.ChatCompletionTool[];
  const sampling = samplingFields(config.llm);
  return async (task, { openai, model, signal }) => {
    const system = systemPrompt(config, task, taskName);
    const history: Message[] = [
      ...(system ? [{ role: "system" as const, content: system }] : []),
      ...openingMessages(task),
    ];
    for (let turn = 0; turn < config.maxTurns; turn++) {
      const response = await openai.chat.completions.create(
        { model, messages: history, ...(tools.length > 0 && { tools }), ...sampling },
        { signal },
      );
      const message = response.choices[0]?.message;
      if (!message)
        throw new NexrlError(
          "the gateway answered a chat call with no choice; check that the agent's base URL is the rollout's gateway URL",
        );
      const calls = (message.tool_calls ?? []).flatMap((call) => (call.type === "function" ? [call] : []));
      history.push({ role: "assistant", content: message.content, ...(calls.length > 0 && { tool_calls: calls }) });
      if (calls.length === 0) return { final_answer: message.content ?? "", history };
      for (const call of calls)
        history.push({
          role: "tool",
          tool_call_id: call.id,
          content: await runTool(config.tools, call.function, { task, signal }),
        });
    }
    return { final_answer: "", history, truncated: true };
  };
}
