/**
 * An agent written with the Vercel AI SDK, as its docs show: `streamText` over an OpenAI-compatible
 * chat model, two turns of one conversation. The one line that points it at nexrl's gateway is
 * `createOpenAI({ baseURL })`; `.chat(model)` calls chat completions.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { streamText, type ModelMessage } from "ai";

interface Task {
  data: { question?: unknown };
}

interface Context {
  baseURL: string;
  model: string;
  signal: AbortSignal;
}

export default async function aiSdkChat(task: Task, { baseURL, model, signal }: Context) {
  const openai = createOpenAI({ baseURL, apiKey: "not-needed" });
  const messages: ModelMessage[] = [{ role: "user", content: String(task.data.question) }];
  let answer = "";
  for (const followUp of [undefined, "go on"]) {
    if (followUp) messages.push({ role: "user", content: followUp });
    const result = streamText({ model: openai.chat(model), messages, maxOutputTokens: 8, abortSignal: signal });
    answer = await result.text;
    messages.push(...(await result.response).messages);
  }
  return { final_answer: answer };
}
