/**
 * An agent written with the Vercel AI SDK, as its docs show, with the provider's default model:
 * `createOpenAI({ baseURL })(model)` calls OpenAI's Responses API (`/v1/responses`), which the
 * gateway serves too. Two turns of one conversation with `generateText`.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, type ModelMessage } from "ai";

interface Task {
  data: { question?: unknown };
}

interface Context {
  baseURL: string;
  model: string;
  signal: AbortSignal;
}

export default async function aiSdkResponses(task: Task, { baseURL, model, signal }: Context) {
  const openai = createOpenAI({ baseURL, apiKey: "not-needed" });
  const messages: ModelMessage[] = [{ role: "user", content: String(task.data.question) }];
  let answer = "";
  for (const followUp of [undefined, "go on"]) {
    if (followUp) messages.push({ role: "user", content: followUp });
    const result = await generateText({ model: openai(model), messages, maxOutputTokens: 8, abortSignal: signal });
    answer = result.text;
    messages.push(...result.response.messages);
  }
  return { final_answer: answer };
}
