/**
 * The declarative agents' tool-calling loop (`declarativeAgent`) against a scripted
 * OpenAI-compatible server on loopback: what it sends (system prompt, tools, sampling fields,
 * tool answers), how each kind of bad tool call is answered so the model can see it, and how an
 * episode ends (final answer, turns run out, a reply with no choice).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentTool, DeclarativeAgentConfig } from "../../src/agent/declarative/config.js";
import { declarativeAgent } from "../../src/agent/declarative/loop.js";
import { NexrlError } from "../../src/errors.js";
import { task } from "../support/pipeline.js";

type ToolCall = { id: string; name: string; arguments: string };
type Reply = { content?: string | null; toolCalls?: ToolCall[] } | "no choice";
type Body = { model: string; messages: Array<Record<string, unknown>>; tools?: unknown[] } & Record<string, unknown>;

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A chat-completions server answering `replies` in order; `bodies` records each request. */
async function scriptedModel(replies: Reply[]): Promise<{ openai: OpenAI; bodies: Body[] }> {
  const bodies: Body[] = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk: Buffer) => (raw += chunk.toString()));
    req.on("end", () => {
      bodies.push(JSON.parse(raw) as Body);
      const reply = replies[bodies.length - 1] ?? { content: "(script ended)" };
      const choices =
        reply === "no choice"
          ? []
          : [
              {
                index: 0,
                finish_reason: reply.toolCalls ? "tool_calls" : "stop",
                message: {
                  role: "assistant",
                  content: reply.content ?? null,
                  ...(reply.toolCalls && {
                    tool_calls: reply.toolCalls.map((c) => ({
                      id: c.id,
                      type: "function",
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  }),
                },
              },
            ];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 0, model: "policy", choices }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { openai: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 }), bodies };
}

/** A tool named `name` whose implementation is `run`. */
function tool(name: string, run: AgentTool["run"]): AgentTool {
  return {
    definition: { type: "function", function: { name, description: name, parameters: { type: "object" } } },
    run,
  };
}

function config(overrides: Partial<DeclarativeAgentConfig> = {}): DeclarativeAgentConfig {
  return { name: "finder", systemPrompt: undefined, maxTurns: 4, llm: {}, tools: [], ...overrides };
}

const context = (openai: OpenAI) => ({
  openai,
  baseURL: openai.baseURL,
  model: "policy",
  signal: new AbortController().signal,
});

describe("declarativeAgent's loop", () => {
  it("answers every kind of tool call in a tool message the model sees next, then returns the final answer", async () => {
    const seen: Array<{ args: Record<string, unknown>; row: unknown }> = [];
    const tools = [
      tool("lookup", (args, ctx) => {
        seen.push({ args, row: ctx.task.data.question });
        return `found ${JSON.stringify(args)}`;
      }),
      tool("boom", () => {
        throw new Error("the index is offline");
      }),
      tool("raw", () => {
        throw "a bare string";
      }),
      tool("stats", async () => Promise.resolve({ hits: 2, best: [1, 2] })),
    ];
    const calls: ToolCall[] = [
      { id: "t1", name: "lookup", arguments: '{"q":"cats"}' },
      { id: "t2", name: "lookup", arguments: "" },
      { id: "t3", name: "nope", arguments: "{}" },
      { id: "t4", name: "lookup", arguments: "{not json" },
      { id: "t5", name: "lookup", arguments: "[1,2]" },
      { id: "t6", name: "lookup", arguments: "null" },
      { id: "t7", name: "boom", arguments: "{}" },
      { id: "t8", name: "raw", arguments: "{}" },
      { id: "t9", name: "stats", arguments: "{}" },
    ];
    const { openai, bodies } = await scriptedModel([
      { content: "let me look", toolCalls: calls },
      { content: "cats are 2" },
    ]);
    const renderedWith: Array<Record<string, unknown>> = [];
    const agent = declarativeAgent(
      config({
        tools,
        systemPrompt: {
          render: (vars) => {
            renderedWith.push(vars);
            return `Task ${String(vars.task_name)} on ${String(vars.date)}: ${String(vars.question)}`;
          },
        },
        llm: { temperature: 0.5, maxTokens: 40, topP: 0.9, stop: ["</answer>"] },
      }),
      "search",
    );
    const result = await agent(task({ prompt: "How many cats?", data: { question: "cats?" } }), context(openai));

    const toolAnswers = (result as { history: Array<{ role: string; content: string; tool_call_id?: string }> }).history
      .filter((m) => m.role === "tool")
      .map((m) => [m.tool_call_id, m.content]);
    expect(toolAnswers).toEqual([
      ["t1", 'found {"q":"cats"}'],
      ["t2", "found {}"],
      ["t3", 'error: unknown tool "nope"; the tools are lookup, boom, raw, stats'],
      ["t4", expect.stringMatching(/^error: the arguments are not valid JSON \(.+\)$/)],
      ["t5", "error: the arguments must be a JSON object"],
      ["t6", "error: the arguments must be a JSON object"],
      ["t7", "error: the index is offline"],
      ["t8", "error: a bare string"],
      ["t9", '{"hits":2,"best":[1,2]}'],
    ]);
    expect(seen).toEqual([
      { args: { q: "cats" }, row: "cats?" },
      { args: {}, row: "cats?" },
    ]);
    expect(result).toMatchObject({ final_answer: "cats are 2" });
    expect(result).not.toHaveProperty("truncated");

    // Two calls: the first with the system prompt, the task, the tools and the sampling fields;
    // the second with the assistant's tool calls and the nine answers appended.
    expect(bodies).toHaveLength(2);
    const [first, second] = bodies as [Body, Body];
    expect(renderedWith[0]).toMatchObject({ question: "cats?", task_name: "search" });
    expect(renderedWith[0]!.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(first.messages).toEqual([
      { role: "system", content: `Task search on ${String(renderedWith[0]!.date)}: cats?` },
      { role: "user", content: "How many cats?" },
    ]);
    expect(first).toMatchObject({ model: "policy", temperature: 0.5, max_tokens: 40, top_p: 0.9, stop: ["</answer>"] });
    expect((first.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
      "lookup",
      "boom",
      "raw",
      "stats",
    ]);
    expect(second.messages).toHaveLength(2 + 1 + calls.length);
    expect(second.messages[2]).toMatchObject({ role: "assistant", content: "let me look" });
    expect((second.messages[2]!.tool_calls as unknown[]).length).toBe(calls.length);
  });

  it("sends chat-message prompts as they are, no tools key and no sampling fields when none are set", async () => {
    const { openai, bodies } = await scriptedModel([
      { toolCalls: [{ id: "x", name: "search", arguments: "{}" }] },
      { content: null },
    ]);
    const messages = [
      { role: "system" as const, content: "be brief" },
      { role: "user" as const, content: "hi" },
    ];
    const result = await declarativeAgent(config({ systemPrompt: "plain system text" }))(
      task({ prompt: messages }),
      context(openai),
    );
    expect(bodies[0]!.messages).toEqual([{ role: "system", content: "plain system text" }, ...messages]);
    expect(Object.keys(bodies[0]!).sort()).toEqual(["messages", "model"]);
    // With no tools, a tool call the model makes anyway is answered with the empty list.
    expect(bodies[1]!.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "x",
      content: 'error: unknown tool "search"; the tools are none',
    });
    // A final reply with no content is an empty answer.
    expect(result).toMatchObject({ final_answer: "" });
  });

  it("stops after maxTurns calls with truncated: true, and refuses a reply without a choice", async () => {
    const again = { toolCalls: [{ id: "a", name: "lookup", arguments: "{}" }] };
    const { openai, bodies } = await scriptedModel([again, again, again]);
    const looping = declarativeAgent(config({ maxTurns: 2, tools: [tool("lookup", () => "more")] }));
    const result = await looping(task({ prompt: "go" }), context(openai));
    expect(bodies).toHaveLength(2);
    expect(result).toMatchObject({ final_answer: "", truncated: true });
    // user, then two rounds of (assistant with a call, tool answer)
    expect((result as { history: unknown[] }).history).toHaveLength(5);

    const empty = await scriptedModel(["no choice"]);
    const error = await Promise.resolve(declarativeAgent(config())(task({ prompt: "go" }), context(empty.openai))).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NexrlError);
    expect((error as Error).message).toMatch(/answered a chat call with no choice; check that the agent's base URL/);
  });
});
