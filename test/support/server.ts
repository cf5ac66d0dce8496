import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect } from "vitest";
import { startServer, type RunningServer, type ServerOptions } from "../../src/server/index.js";
import { tokens as byteTokens } from "./training.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A server on 127.0.0.1 in a temporary folder, closed (and the folder removed) after the test. */
export async function server(options: Partial<ServerOptions> = {}): Promise<RunningServer> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-server-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const running = await startServer({ outputDir: dir, longPollTimeoutMs: 50, log: () => undefined, ...options });
  cleanups.push(() => running.close());
  return running;
}

/** A JSON answer. */
export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

/** Sends a request with fetch and parses the JSON answer. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const response = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** Tokens of `text` with BOS and EOS. */
export const tokens = byteTokens;

/** A Tinker-shaped SFT datum over `text`. */
export function tinkerDatum(text: string) {
  const t = tokens(text);
  const n = t.length - 1;
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: t.slice(0, -1) }] },
    loss_fn_inputs: {
      target_tokens: { data: t.slice(1), dtype: "int64", shape: [n] },
      weights: { data: t.slice(1).map(() => 1), dtype: "float32", shape: [n] },
    },
  };
}

/** Tinker's AdamParams JSON. */
export const ADAM = { learning_rate: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0, grad_clip_norm: 0 };

/** A Tinker session on `url` with one model (default `tiny`), created and awaited as the SDK does. */
export async function tinkerSession(url: string, baseModel = "tiny"): Promise<{ sessionId: string; modelId: string }> {
  const { body } = await call(url, "POST", "/api/v1/create_session", {
    tags: [],
    sdk_version: "0.21.0",
    type: "create_session",
  });
  const created = await call(url, "POST", "/api/v1/create_model", {
    session_id: body.session_id,
    model_seq_id: 0,
    base_model: baseModel,
    type: "create_model",
  });
  const modelId = created.body.model_id as string;
  const done = await call(url, "POST", "/api/v1/retrieve_future", {
    request_id: created.body.request_id,
    allow_metadata_only: false,
  });
  expect(done.body).toEqual({ model_id: modelId, type: "create_model" });
  return { sessionId: body.session_id, modelId };
}

/** The result of Tinker future `requestId` on `url`, polled until it is not `try_again`. */
export async function tinkerResult(url: string, requestId: string): Promise<any> {
  for (;;) {
    const answer = await call(url, "POST", "/api/v1/retrieve_future", {
      request_id: requestId,
      allow_metadata_only: false,
    });
    expect(answer.status).toBe(200);
    if (answer.body.type !== "try_again") return answer.body;
  }
}
