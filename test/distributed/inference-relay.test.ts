/**
 * {@link InferenceRelay} and {@link RelayInferenceClient}: the driver's inference client served
 * over HTTP to the workers, with its token, its answers and its failures.
 */
import { afterEach, describe, expect, it } from "vitest";
import { RelayCallError } from "../../src/errors.js";
import { InferenceRelay, RelayInferenceClient } from "../../src/distributed/inference-relay.js";
import type { InferenceClient, InferenceOptions } from "../../src/contracts/inference.js";
import type { Tokenizer } from "../../src/wire/tokenizer.js";

/** What the driver's client was called with. */
const calls: Array<{ kind: string; input: unknown; options: InferenceOptions }> = [];

/** A driver-side client that echoes its input, or throws what `failWith` holds. */
let failWith: unknown;
const driverClient = {
  completion(prompt: unknown, options: InferenceOptions) {
    calls.push({ kind: "completion", input: prompt, options });
    if (failWith !== undefined) return Promise.reject(failWith);
    return Promise.resolve({
      text: `echo ${String(prompt)}`,
      tokens: [1, 2],
      logprobs: [-Infinity, -0.5],
      policyVersion: 3,
    });
  },
  chat(messages: unknown, options: InferenceOptions) {
    calls.push({ kind: "chat", input: messages, options });
    return Promise.resolve({ text: "chat answer", tokens: [4], policyVersion: 5 });
  },
} as unknown as InferenceClient;

const tokenizer = {} as Tokenizer;
let relay: InferenceRelay | undefined;

afterEach(async () => {
  await relay?.close();
  relay = undefined;
  calls.length = 0;
  failWith = undefined;
});

describe("InferenceRelay", () => {
  it("serves completion and chat calls of the driver's client to a worker holding its token", async () => {
    relay = await InferenceRelay.start(driverClient, { host: "127.0.0.1", port: 0, public_host: "localhost" });
    expect(relay.target.url).toMatch(/^http:\/\/localhost:\d+$/);
    const client = new RelayInferenceClient(
      { ...relay.target, url: relay.target.url.replace("localhost", "127.0.0.1") },
      tokenizer,
    );
    expect(client.tokenizer).toBe(tokenizer);
    // Non-finite logprobs cross the relay intact.
    expect(await client.completion("2+2=")).toEqual({
      text: "echo 2+2=",
      tokens: [1, 2],
      logprobs: [-Infinity, -0.5],
      policyVersion: 3,
    });
    const messages = [{ role: "user" as const, content: "hi" }];
    expect(await client.chat(messages, { maxTokens: 7 })).toMatchObject({ text: "chat answer", policyVersion: 5 });
    expect(calls.map((call) => [call.kind, call.input])).toEqual([
      ["completion", "2+2="],
      ["chat", messages],
    ]);
    expect(calls[1]!.options.maxTokens).toBe(7);
    await client.close();
  });

  it("answers a failure of the driver's client with its name, message and retryability", async () => {
    relay = await InferenceRelay.start(driverClient, { host: "127.0.0.1", port: 0 });
    const client = new RelayInferenceClient(relay.target, tokenizer);
    failWith = Object.assign(new Error("sampler is down"), { name: "SamplerError", isRetryable: false });
    const refused = await client.completion("x").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RelayCallError);
    expect((refused as RelayCallError).status).toBe(500);
    expect((refused as RelayCallError).isRetryable).toBe(false);
    expect((refused as Error).message).toBe("the run's inference relay answered 500: SamplerError: sampler is down");
    failWith = "a bare string";
    const bare = (await client.completion("x").catch((error: unknown) => error)) as RelayCallError;
    expect(bare.message).toBe("the run's inference relay answered 500: Error: a bare string");
    expect(bare.isRetryable).toBe(true);
  });

  it("refuses a caller without its token (401) and anything but POST /inference (404)", async () => {
    relay = await InferenceRelay.start(driverClient, { host: "127.0.0.1", port: 0 });
    const stranger = new RelayInferenceClient({ ...relay.target, token: "guess" }, tokenizer);
    const refused = (await stranger.completion("x").catch((error: unknown) => error)) as RelayCallError;
    expect(refused.status).toBe(401);
    expect(refused.isRetryable).toBe(false);
    expect(refused.message).toContain("only its workers may call it");
    const wrongPath = await fetch(`${relay.target.url}/other`, {
      headers: { authorization: `Bearer ${relay.target.token}` },
    });
    expect(wrongPath.status).toBe(404);
    expect(await wrongPath.json()).toEqual({
      error: "not_found",
      message: "the relay answers POST /inference only",
      retryable: false,
    });
    expect(calls).toEqual([]);
  });
});
