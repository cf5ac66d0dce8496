import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import {
  OpenAIInferenceClient,
  parseTokenIdStrings,
  tokenIdString,
  type OpenAIInferenceClientOptions,
} from "../../src/inference/index.js";
import { APIError, APITimeoutError, UnexpectedResponseError } from "../../src/errors.js";

/** One request the scripted server received. */
interface Received {
  path: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

/** What the scripted server answers: a status, headers and a JSON body, after an optional delay. */
interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body: unknown;
  delayMs?: number;
}

// A loopback server answering in vLLM's documented wire format, scripted per test, for the
// cases `nexrl serve` does not produce (parsed tool calls, server failures, malformed answers).
let server: Server;
let baseURL: string;
let answer: (received: Received) => Answer;
const received: Received[] = [];

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
}

beforeAll(async () => {
  server = createServer(
    (req, res) =>
      void (async () => {
        const request = { path: req.url ?? "", authorization: req.headers.authorization, body: await readBody(req) };
        received.push(request);
        const { status = 200, headers = {}, body, delayMs = 0 } = answer(request);
        setTimeout(() => {
          if (!res.destroyed)
            res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
        }, delayMs);
      })(),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const tokenizer = new ByteTokenizer();
const client = (options: Partial<OpenAIInferenceClientOptions> = {}) =>
  new OpenAIInferenceClient({
    baseURL,
    apiKey: "sk-very-secret",
    model: "qwen-lora-7",
    tokenizer,
    maxRetries: 0,
    ...options,
  });

const completionAnswer = (promptIds: number[]): Answer => ({
  body: {
    id: "cmpl-1",
    object: "text_completion",
    created: 1,
    model: "qwen-lora-7",
    choices: [
      {
        index: 0,
        text: "hi",
        finish_reason: "length",
        logprobs: { tokens: ["h", "i"], token_logprobs: [-0.5, -1.25], top_logprobs: null, text_offset: [0, 1] },
        prompt_token_ids: promptIds,
        token_ids: [104, 105],
      },
    ],
    usage: { prompt_tokens: promptIds.length, completion_tokens: 2, total_tokens: promptIds.length + 2 },
  },
});

describe("OpenAIInferenceClient wire format", () => {
  it("sends the prompt as token ids with the token-id options, sampling defaults and extra fields", async () => {
    answer = (r) => completionAnswer(r.body.prompt as number[]);
    received.length = 0;
    const result = await client({
      defaults: { temperature: 0.7, topK: 20, maxTokens: 64 },
      extraBody: { min_tokens: 1 },
      policyVersion: 2,
    }).completion("ok", { topP: 0.9, stop: ["\n"], seed: 4 });
    expect(received).toHaveLength(1);
    expect(received[0]!.path).toBe("/v1/completions");
    expect(received[0]!.authorization).toBe("Bearer sk-very-secret");
    expect(received[0]!.body).toEqual({
      model: "qwen-lora-7",
      prompt: [256, 111, 107],
      max_tokens: 64,
      n: 1,
      temperature: 0.7,
      top_p: 0.9,
      top_k: 20,
      stop: ["\n"],
      seed: 4,
      logprobs: 1,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      include_stop_str_in_output: true,
      min_tokens: 1,
    });
    expect(result).toEqual({
      promptTokens: [256, 111, 107],
      responseTokens: [104, 105],
      response: "hi",
      logprobs: [-0.5, -1.25],
      finishReason: "length",
      policyVersion: 2,
    });
  });

  it("passes tools and template kwargs to chats and returns the tool calls the server parsed", async () => {
    const toolCall = {
      id: "chatcmpl-tool-1",
      type: "function",
      function: { name: "get_weather", arguments: '{"city": "Paris"}' },
    };
    answer = () => ({
      body: {
        id: "chatcmpl-1",
        object: "chat.completion",
        created: 1,
        model: "qwen-lora-7",
        prompt_token_ids: [151644, 872, 198],
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: null, tool_calls: [toolCall] },
            finish_reason: "tool_calls",
            logprobs: {
              content: [
                { token: "token_id:151657", logprob: -0.1, bytes: null, top_logprobs: [] },
                { token: "token_id:151645", logprob: -0.2, bytes: null, top_logprobs: [] },
              ],
            },
            token_ids: [151657, 151645],
          },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      },
    });
    received.length = 0;
    const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object" } } }];
    const messages = [{ role: "user", content: "Weather in Paris?" }];
    const result = await client().chat(messages, {
      tools,
      chatTemplateKwargs: { enable_thinking: false },
      maxTokens: 32,
    });
    expect(received[0]!.path).toBe("/v1/chat/completions");
    expect(received[0]!.body).toMatchObject({
      messages,
      tools,
      chat_template_kwargs: { enable_thinking: false },
      logprobs: true,
      return_token_ids: true,
      max_tokens: 32,
    });
    expect(result).toEqual({
      promptTokens: [151644, 872, 198],
      responseTokens: [151657, 151645],
      response: "",
      logprobs: [-0.1, -0.2],
      finishReason: "stop",
      toolCalls: [toolCall],
    });
  });

  it("reads token_id:<n> strings and refuses anything else as ids", () => {
    expect(parseTokenIdStrings([tokenIdString(0), tokenIdString(151645)])).toEqual([0, 151645]);
    expect(parseTokenIdStrings(["token_id:12", "hello"])).toBeUndefined();
    expect(parseTokenIdStrings(["12"])).toBeUndefined();
  });

  it("rejects answers without a choice or with logprobs that do not match the ids", async () => {
    answer = () => ({ body: { id: "x", object: "text_completion", created: 1, model: "m", choices: [] } });
    await expect(client().completion([1, 2])).rejects.toThrow(UnexpectedResponseError);
    answer = (r) => {
      const ok = completionAnswer(r.body.prompt as number[]).body as {
        choices: Array<{ logprobs: { token_logprobs: number[] } }>;
      };
      ok.choices[0]!.logprobs.token_logprobs = [-0.5];
      return { body: ok };
    };
    await expect(client().completion([1, 2])).rejects.toThrow(
      /returned 1 logprobs for 2 response tokens; the server must honour logprobs: 1/,
    );
    answer = () => ({ body: { id: "x", object: "chat.completion", created: 1, model: "m", choices: [] } });
    await expect(client().chat([{ role: "user", content: "x" }])).rejects.toThrow(
      /chat\/completions returned no choice; check that the server is OpenAI-compatible/,
    );
    answer = () => ({ body: null });
    await expect(client().completion([1, 2])).rejects.toThrow(
      /completions answered with something other than a JSON object; check that the server is OpenAI-compatible/,
    );
  });

  it("re-tokenises a chat answer that reports no ids only when allowed, and says so in the result", async () => {
    answer = () => ({
      body: {
        id: "chat-1",
        object: "chat.completion",
        created: 1,
        model: "qwen-lora-7",
        prompt_token_ids: [7, 8, 9],
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: "hi" },
            finish_reason: "stop",
            logprobs: {
              content: [
                { token: "h", logprob: -0.5 },
                { token: "i", logprob: -1 },
              ],
            },
          },
        ],
      },
    });
    const messages = [{ role: "user" as const, content: "x" }];
    await expect(client().chat(messages)).rejects.toThrow(/token_ids/);
    const allowed = client({ allowRetokenize: true });
    const result = await allowed.chat(messages);
    expect(result).toMatchObject({
      promptTokens: [7, 8, 9],
      responseTokens: tokenizer.encode("hi"),
      logprobs: [-0.5, -1],
      retokenized: ["response"],
    });
    await allowed.close();
    // A closed client sends nothing more.
    received.length = 0;
    await expect(allowed.chat(messages)).rejects.toThrow(/closed/);
    expect(received).toHaveLength(0);
  });
});

describe("OpenAIInferenceClient failures", () => {
  it("reports HTTP errors with status, request id and retryability, retries them, and never shows the API key", async () => {
    answer = () => ({
      status: 503,
      headers: { "x-request-id": "req-42" },
      body: { error: { message: "engine is sleeping", type: "server_error", param: null, code: null } },
    });
    received.length = 0;
    const error = (await client({ maxRetries: 1 })
      .completion([1, 2])
      .catch((e: unknown) => e)) as APIError;
    expect(received).toHaveLength(2);
    expect(error).toBeInstanceOf(APIError);
    expect([error.status, error.requestId, error.isRetryable]).toEqual([503, "req-42", true]);
    expect(error.message).toMatch(
      new RegExp(
        `^POST ${baseURL}/completions failed with HTTP 503: .*engine is sleeping \\(request id req-42\\)\\. The service failed; retry later`,
      ),
    );
    expect(error.message).not.toContain("sk-very-secret");

    answer = () => ({
      status: 401,
      body: { error: { message: "bad key", type: "invalid_request_error", param: null, code: "invalid_api_key" } },
    });
    const denied = (await client()
      .chat([{ role: "user", content: "x" }])
      .catch((e: unknown) => e)) as APIError;
    expect([denied.status, denied.isRetryable]).toEqual([401, false]);
    expect(denied.message).toMatch(/HTTP 401.*check apiKey \(or OPENAI_API_KEY\)/);
    expect(denied.message).not.toContain("sk-very-secret");
  });

  it("reports unreachable servers and timeouts as retryable", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = (await client({ baseURL: `http://127.0.0.1:${port}/v1` })
      .completion([1])
      .catch((e: unknown) => e)) as APIError;
    expect([refused.status, refused.isRetryable]).toEqual([undefined, true]);
    expect(refused.message).toMatch(
      /could not connect \(connection refused: nothing listens on 127\.0\.0\.1:\d+\); check the base URL/,
    );

    answer = (r) => ({ ...completionAnswer(r.body.prompt as number[]), delayMs: 1_000 });
    const slow = (await client({ timeoutMs: 100 })
      .completion([1])
      .catch((e: unknown) => e)) as APIError;
    expect(slow).toBeInstanceOf(APITimeoutError);
    expect(slow.message).toMatch(/got no answer within 100 ms; raise timeoutMs or lower maxTokens/);
  });

  it("stops on an aborted signal, before sending or in flight", async () => {
    received.length = 0;
    await expect(client().completion([1], { signal: AbortSignal.abort() })).rejects.toThrow(/abort/i);
    expect(received).toHaveLength(0);
    answer = (r) => ({ ...completionAnswer(r.body.prompt as number[]), delayMs: 1_000 });
    const started = Date.now();
    await expect(client().completion([1], { signal: AbortSignal.timeout(50) })).rejects.toThrow(/abort/i);
    expect(Date.now() - started).toBeLessThan(900);
  });
});
