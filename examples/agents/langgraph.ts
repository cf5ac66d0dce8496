/**
 * An agent written with LangGraph.js, as its docs show: a prebuilt ReAct agent (`createReactAgent`)
 * over a `ChatOpenAI` model with one tool; the graph calls the model, runs the tool it asks for and
 * calls the model again with the result. The one line that points it at nexrl's gateway is
 * `configuration: { baseURL }`.
 */
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
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

const lookup = tool(async ({ key }) => lookUp(key), {
  name: "lookup",
  description: "Looks a key up in the table",
  schema: z.object({ key: z.string().describe("the key to look up") }),
});

export default async function langgraphAgent(task: Task, { baseURL, model, signal }: Context) {
  const llm = new ChatOpenAI({ model, apiKey: "not-needed", configuration: { baseURL }, maxTokens: 24, maxRetries: 0 });
  const agent = createReactAgent({ llm, tools: [lookup] });
  const state = await agent.invoke(
    { messages: [{ role: "user", content: String(task.data.question) }] },
    { signal, recursionLimit: 6 },
  );
  return { final_answer: state.messages.at(-1)!.text };
}
