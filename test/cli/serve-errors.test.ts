/**
 * `nexrl serve` (the built CLI) answers errors in the shape of the client that asked: OpenAI's
 * `{error: {message, type, param, code}}` to the `openai` client, on unknown routes under `/v1/`
 * and on the Tinker and Weaver routes too, so that the client shows the message; the Tinker and
 * Weaver shape `{error, message, retryable}` to their clients.
 */
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { startServe } from "../support/runs.js";

describe("nexrl serve's errors", () => {
  it("reach the openai client with their message, and Tinker/Weaver clients in their own shape", async () => {
    const serve = startServe([]);
    try {
      const url = await serve.url;
      const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
      const unknown = (await openai.embeddings
        .create({ model: "tiny", input: "x" })
        .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
      expect(unknown.message).toBe(
        "404 no route for POST /v1/embeddings; see `nexrl serve --help` for the protocols served",
      );
      expect(unknown.error).toMatchObject({ type: "invalid_request_error", code: "not_found" });
      // An openai client pointed at the Tinker and Weaver prefix by mistake.
      const misdirected = new OpenAI({ baseURL: `${url}/api/v1`, apiKey: "unused", maxRetries: 0 });
      const wrong = (await misdirected.chat.completions
        .create({ model: "tiny", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(wrong).toBeInstanceOf(OpenAI.APIError);
      expect(wrong.status).toBe(404);
      expect(wrong.message).toMatch(/^404 .*\/api\/v1\/chat\/completions/);
      expect(wrong.message).not.toBe('404 "not_found"');
      expect((wrong.error as { type: string }).type).toBe("invalid_request_error");
      // Tinker's and Weaver's clients read {error: code, message, retryable}.
      const tinker = await fetch(`${url}/api/v1/no_such_route`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(tinker.status).toBe(404);
      expect(await tinker.json()).toMatchObject({
        error: expect.any(String),
        message: expect.any(String),
        retryable: false,
      });
    } finally {
      serve.child.kill("SIGTERM");
      await serve.exited;
    }
  }, 60_000);
});
