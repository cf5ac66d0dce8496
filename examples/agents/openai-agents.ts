/**
 * An agent written with the OpenAI Agents SDK, as its docs show, with its defaults (the Responses
 * API): an `Agent` with a function `tool`, run by a `Runner` whose `OpenAIProvider` is pointed at
 * nexrl's gateway with `baseURL`. Tracing is off: its traces would go to OpenAI's servers.
 *
 * The SDK ends a run with a `ModelBehaviorError` when an answer is cut at its token limit (the
 * response is `incomplete`); the agent reports that episode as truncated, so that it is still
 * trained on (with `rollout_worker.agent.truncated_reward`) instead of failing the rollout.
 */
import { Agent, ModelBehaviorError, OpenAIProvider, Runner, setTracingDisabled, tool } from "@openai/agents";
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

setTracingDisabled(true);

const lookup = tool({
  name: "lookup",
  description: "Looks a key up in the table",
  parameters: z.object({ key: z.string().describe("the key to look up") }),
  execute: async ({ key }) => lookUp(key),
});

export default async function openaiAgent(task: Task, { baseURL, model, signal }: Context) {
  const agent = new Agent({
    name: "Lookup agent",
    instructions: "Use the lookup tool.",
    model,
    modelSettings: { maxTokens: 24 },
    tools: [lookup],
  });
  const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL, apiKey: "not-needed" }) });
  try {
    const result = await runner.run(agent, String(task.data.question), { maxTurns: 3, signal });
    return { final_answer: result.finalOutput ?? "" };
  } catch (error) {
    // Cut at the token limit: the final answer is the model's last reply, as nexrl recorded it.
    if (error instanceof ModelBehaviorError && /incomplete/.test(error.message)) return { truncated: true };
    throw error;
  }
}
