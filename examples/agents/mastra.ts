/**
 * An agent written with Mastra, as its docs show: an `Agent` with instructions, a tool made with
 * `createTool`, and an OpenAI-compatible model. The one line that points it at nexrl's gateway is
 * the model's `url: baseURL`.
 */
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { z } from "zod";
import { lookUp } from "./table.js";

interface Task {
  data: { question?: unknown };
}

interface Context {
  baseURL: string;
  model: string;
  signal: AbortSignal;
}

const lookup = createTool({
  id: "lookup",
  description: "Looks a key up in the table",
  inputSchema: z.object({ key: z.string().describe("the key to look up") }),
  execute: async ({ key }) => lookUp(key),
});

export default async function mastraAgent(task: Task, { baseURL, model, signal }: Context) {
  const agent = new Agent({
    id: "lookup-agent",
    name: "Lookup agent",
    instructions: "Use the lookup tool.",
    model: { providerId: "nexrl", modelId: model, url: baseURL, apiKey: "not-needed" },
    tools: { lookup },
  });
  const result = await agent.generate(String(task.data.question), {
    maxSteps: 3,
    abortSignal: signal,
    modelSettings: { maxOutputTokens: 24 },
  });
  return { final_answer: result.text };
}
