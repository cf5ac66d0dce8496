/**
 * An agent written with LangChain.js, as its docs show: a `ChatOpenAI` model invoked on a growing
 * list of messages, two turns. The one line that points it at nexrl's gateway is
 * `configuration: { baseURL }`.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";

interface Task {
  data: { question?: unknown };
}

interface Context {
  baseURL: string;
  model: string;
  signal: AbortSignal;
}

export default async function langchainChat(task: Task, { baseURL, model, signal }: Context) {
  const llm = new ChatOpenAI({ model, apiKey: "not-needed", configuration: { baseURL }, maxTokens: 8, maxRetries: 0 });
  const messages: BaseMessage[] = [new HumanMessage(String(task.data.question))];
  for (const followUp of [undefined, "go on"]) {
    if (followUp) messages.push(new HumanMessage(followUp));
    messages.push(await llm.invoke(messages, { signal }));
  }
  return { final_answer: messages.at(-1)!.text };
}
