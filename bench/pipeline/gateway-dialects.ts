/**
 * Row 7 of the pipeline suite: the agent gateway's cost per call in each chat dialect. The same
 * two-turn tool episode (the model calls a tool, the agent sends the result back, the model
 * answers) goes to one gateway as chat completions, as Responses items and as Anthropic
 * Messages content blocks, against a policy
 * that answers at once, so what is timed is the gateway itself (parsing, rendering with the
 * sampled tokens spliced in, recording, answering) and loopback HTTP.
 */
import { AgentGateway } from "../../dist/agent/index.js";
import { ByteTokenizer } from "../../dist/engine/index.js";
import type { InferenceClient } from "../../dist/inference/index.js";
import type { Contender } from "../lib/timing.js";

const tokenizer = new ByteTokenizer();
const TOOL_CALL = '<tool_call>{"name":"lookup","arguments":{"k":"a"}}</tool_call>';
const ANSWER = "The answer is 7.";
const QUESTION = "find the value of a, then say it";

/** A policy that calls the tool on a conversation's first turn and answers on the next, instantly. */
const instantPolicy: InferenceClient = {
  tokenizer,
  async completion(prompt) {
    const ids = prompt as number[];
    const text = tokenizer.decode(ids).includes("<|tool|>") ? ANSWER : TOOL_CALL;
    const responseTokens = [...tokenizer.encode(text), tokenizer.eosId];
    return {
      promptTokens: ids,
      responseTokens,
      response: text,
      logprobs: responseTokens.map(() => -0.1),
      finishReason: "stop",
    };
  },
  chat: () => Promise.reject(new Error("the gateway calls completion only")),
};

/** The parts of the answers an episode reads. */
interface ChatAnswer {
  choices: Array<{ message: { tool_calls: Array<{ id: string }> } }>;
}
interface ResponsesAnswer {
  output: Array<{ call_id?: string }>;
}
interface MessagesAnswer {
  content: Array<{ type: string; id?: string }>;
}

async function post<T>(url: string, body: unknown): Promise<T> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** One episode as chat completions: 2 calls. */
async function chatEpisode(baseURL: string): Promise<void> {
  const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }];
  const messages: unknown[] = [{ role: "user", content: QUESTION }];
  const first = await post<ChatAnswer>(`${baseURL}/chat/completions`, { model: "policy", messages, tools });
  const message = first.choices[0]!.message;
  messages.push(message, { role: "tool", tool_call_id: message.tool_calls[0]!.id, content: "7" });
  await post(`${baseURL}/chat/completions`, { model: "policy", messages, tools });
}

/** The same episode as Responses items sent back whole (as the OpenAI Agents SDK does): 2 calls. */
async function responsesEpisode(baseURL: string): Promise<void> {
  const tools = [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} }, strict: false }];
  const input: unknown[] = [{ role: "user", content: QUESTION }];
  const first = await post<ResponsesAnswer>(`${baseURL}/responses`, { model: "policy", input, tools });
  input.push(...first.output, { type: "function_call_output", call_id: first.output[0]!.call_id, output: "7" });
  await post(`${baseURL}/responses`, { model: "policy", input, tools });
}

/** The same episode as Anthropic Messages, the answer's content blocks sent back whole (as the Anthropic SDK's tool loop does): 2 calls. */
async function messagesEpisode(baseURL: string): Promise<void> {
  const tools = [{ name: "lookup", input_schema: { type: "object", properties: {} } }];
  const messages: unknown[] = [{ role: "user", content: QUESTION }];
  const first = await post<MessagesAnswer>(`${baseURL}/messages`, {
    model: "policy",
    max_tokens: 128,
    messages,
    tools,
  });
  const call = first.content.find((block) => block.type === "tool_use")!;
  messages.push(
    { role: "assistant", content: first.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "7" }] },
  );
  await post(`${baseURL}/messages`, { model: "policy", max_tokens: 128, messages, tools });
}

/**
 * A gateway and one contender per dialect, each running `episodes` episodes (in a fresh rollout
 * each, as a training run opens them) per call and returning the calls made.
 */
export async function gatewayDialectBench(
  episodes: number,
): Promise<{ contenders: Record<"chat" | "responses" | "messages", Contender>; close(): Promise<void> }> {
  const gateway = await AgentGateway.start({ log: () => undefined });
  const dialect =
    (episode: (baseURL: string) => Promise<void>): Contender =>
    async () => {
      for (let i = 0; i < episodes; i++) {
        const session = gateway.openRollout(instantPolicy, { maxTokensPerCall: 128 });
        await episode(session.baseURL);
        if (session.finish().calls.length !== 2) throw new Error("an episode did not record its 2 calls");
      }
      return 2 * episodes;
    };
  return {
    contenders: {
      chat: dialect(chatEpisode),
      responses: dialect(responsesEpisode),
      messages: dialect(messagesEpisode),
    },
    close: () => gateway.close(),
  };
}
