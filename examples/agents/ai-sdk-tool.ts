/**
 * An agent written with the Vercel AI SDK, as its docs show: `generateText` with a `tool()` and
 * multi-step calls (`stopWhen`): the model asks for the tool, the SDK runs it and sends its result
 * back, the model answers. The one line that points it at nexrl's gateway is `createOpenAI({ baseURL })`.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, tool } from "ai";
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

export default async function aiSdkTool(task: Task, { baseURL, model, signal }: Context) {
  const openai = createOpenAI({ baseURL, apiKey: "not-needed" });
  const result = await generateText({
    model: openai.chat(model),
    system: "Use the lookup tool.",
    prompt: String(task.data.question),
    tools: {
      lookup: tool({
        description: "Looks a key up in the table",
        inputSchema: z.object({ key: z.string().describe("the key to look up") }),
        execute: async ({ key }) => lookUp(key),
      }),
    },
    stopWhen: isStepCount(3),
    maxOutputTokens: 24,
    abortSignal: signal,
  });
  return { final_answer: result.text, tool_calls: result.steps.flatMap((step) => step.toolCalls).length };
}
