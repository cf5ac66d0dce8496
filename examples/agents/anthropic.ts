/**
 * An agent written with the Anthropic SDK, as its docs show: `messages.create` with a tool, running
 * the tool the model asks for and sending its `tool_result` back until the model answers. The one
 * line that points it at nexrl's gateway is `baseURL`: the SDK adds `/v1/messages` itself, so it
 * gets the rollout's base URL without its `/v1`.
 */
import Anthropic from "@anthropic-ai/sdk";
import { lookUp } from "./table.js";

interface Task {
  data: { question?: unknown };
}

interface Context {
  baseURL: string;
  model: string;
  signal: AbortSignal;
}

const tools: Anthropic.Tool[] = [
  {
    name: "lookup",
    description: "Looks a key up in the table",
    input_schema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  },
];

export default async function anthropicAgent(task: Task, { baseURL, model, signal }: Context) {
  const client = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey: "not-needed", maxRetries: 0 });
  const messages: Anthropic.MessageParam[] = [{ role: "user", content: String(task.data.question) }];
  for (let turn = 0; turn < 3; turn++) {
    const message = await client.messages.create(
      { model, max_tokens: 24, system: "Use the lookup tool.", tools, messages },
      { signal },
    );
    messages.push({ role: "assistant", content: message.content });
    const calls = message.content.filter((block) => block.type === "tool_use");
    if (calls.length === 0)
      return { final_answer: message.content.map((block) => (block.type === "text" ? block.text : "")).join("") };
    messages.push({
      role: "user",
      content: calls.map((call) => ({
        type: "tool_result" as const,
        tool_use_id: call.id,
        content: lookUp(String((call.input as { key?: unknown }).key)),
      })),
    });
  }
  return { final_answer: "", truncated: true };
}
