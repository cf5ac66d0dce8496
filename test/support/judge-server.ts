/**
 * A small OpenAI-compatible judge on 127.0.0.1 for tests: `/v1/chat/completions` answers what
 * the test's `answer` function says (a reply, an HTTP status, or no answer until the client
 * gives up), and records every request.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";

/** What the judge does with one request. */
export type JudgeAnswer = { reply: string } | { status: number } | { hang: true };

/** One request the judge received. */
export interface JudgeRequest {
  /** The `Authorization` header. */
  authorization: string | undefined;
  /** The model asked for. */
  model: string;
  /** The user message: the rendered rubric. */
  prompt: string;
  /** `max_tokens` and `temperature` as sent. */
  maxTokens: number;
  temperature: number;
}

/** A running loopback judge. */
export interface LoopbackJudge {
  /** Base URL of its API (`http://127.0.0.1:PORT/v1`). */
  baseUrl: string;
  /** Every request received, in order. */
  requests: JudgeRequest[];
  /** Requests in flight now, and the most there ever were. */
  inFlight: { now: number; max: number };
}

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
}

function send(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}

/**
 * Starts a judge; `answer` gets each request and its index (from 0) and may wait before it
 * answers. Closed after the test.
 */
export async function startJudge(
  answer: (request: JudgeRequest, index: number) => JudgeAnswer | Promise<JudgeAnswer>,
): Promise<LoopbackJudge> {
  const requests: JudgeRequest[] = [];
  const inFlight = { now: 0, max: 0 };
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") return send(res, 404, { error: "not found" });
      const json = await body(req);
      const messages = json.messages as Array<{ content: string }>;
      const request: JudgeRequest = {
        authorization: req.headers.authorization,
        model: String(json.model),
        prompt: messages.at(-1)!.content,
        maxTokens: Number(json.max_tokens),
        temperature: Number(json.temperature),
      };
      const index = requests.push(request) - 1;
      inFlight.now++;
      inFlight.max = Math.max(inFlight.max, inFlight.now);
      try {
        const what = await answer(request, index);
        if ("hang" in what) {
          // Never answers: the client's timeout ends the request.
          await new Promise<void>((resolve) => res.on("close", resolve));
          return;
        }
        if ("status" in what) return send(res, what.status, { error: { message: "judge failure" } });
        send(res, 200, {
          id: `judge-${index}`,
          object: "chat.completion",
          created: 0,
          model: request.model,
          choices: [{ index: 0, message: { role: "assistant", content: what.reply }, finish_reason: "stop" }],
        });
      } finally {
        inFlight.now--;
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests, inFlight };
}
