import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { createOpenAIHandler, type ServedModel } from "../../src/server/openai.js";
import { OpenAIInferenceClient, type VllmTokenIdFields } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { SampleOutput, SamplingClient, SamplingParams } from "../../src/contracts/training.js";
import { adamParams, datum, modelInputTokens } from "../../src/wire/wire.js";
import { UnexpectedResponseError } from "../../src/errors.js";

/** What a served sampler was asked and answered. */
interface Call {
  prompt: number[];
  numSamples: number;
  params: SamplingParams;
  output: SampleOutput;
}

/** Wraps a sampler so that tests see exactly the prompt ids it read and the sequences it returned. */
function recording(inner: SamplingClient): { sampler: SamplingClient; calls: Call[] } {
  const calls: Call[] = [];
  const sampler: SamplingClient = {
    modelPath: inner.modelPath,
    computeLogprobs: (tokens) => inner.computeLogprobs(tokens),
    async sample(prompt, numSamples, params) {
      const future = await inner.sample(prompt, numSamples, params);
      return {
        result: async () => {
          const output = await future.result();
          calls.push({ prompt: modelInputTokens(prompt), numSamples, params, output });
          return output;
        },
      };
    },
  };
  return { sampler, calls };
}

const tokenizer = new ByteTokenizer();
const CAT_TEXT = "the cat sat on the mat. the cat sat on the mat. the dog";
let dir: string;
let server: Server;
let baseURL: string;
let openai: OpenAI;
let tiny: ReturnType<typeof recording>;
let cat: ReturnType<typeof recording>;
let catPath: string;
let scorer: SamplingClient;
const logged: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "nexrl-openai-"));
  const service = new LocalTrainingService({ outputDir: dir, seed: 1 });
  // A tiny model that has memorised a sentence, so that greedy answers are readable and stop strings occur.
  const trainer = await service.createTrainingClient({ baseModel: "tiny" });
  const text = tokenizer.encode(CAT_TEXT, { addBos: true });
  for (let i = 0; i < 150; i++) {
    await trainer.forwardBackward(
      [datum(text.slice(0, -1), { target_tokens: text.slice(1), weights: text.slice(1).map(() => 1) })],
      "cross_entropy",
    );
    await trainer.optimStep(adamParams({ learningRate: 1e-2 }));
  }
  catPath = (await (await trainer.saveWeightsForSampler("cat")).result()).path;
  tiny = recording(await service.createSamplingClient("tiny"));
  cat = recording(await service.createSamplingClient(catPath));
  scorer = await service.createSamplingClient("tiny");
  const broken: ServedModel = {
    tokenizer,
    samplingClient: {
      modelPath: "broken",
      computeLogprobs: async () => [],
      sample: async () => ({ result: async () => Promise.reject(new Error("the GPU caught fire")) }),
    },
  };
  const handler = createOpenAIHandler({
    models: { tiny: { samplingClient: tiny.sampler, tokenizer }, cat: { samplingClient: cat.sampler, tokenizer } },
    resolveModel: async (name) =>
      name === "broken"
        ? broken
        : name === catPath
          ? { samplingClient: await service.createSamplingClient(catPath), tokenizer }
          : undefined,
    log: (line) => logged.push(line),
  });
  server = createServer((req, res) => {
    void handler(req, res).then((handled) => {
      if (!handled) res.writeHead(404, { "content-type": "text/plain" }).end("not mine");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  openai = new OpenAI({ baseURL, apiKey: "sk-test-key", maxRetries: 0 });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

type CompletionChoice = OpenAI.CompletionChoice & VllmTokenIdFields & { stop_reason?: string | null };
type ChatChoice = OpenAI.ChatCompletion.Choice & VllmTokenIdFields & { stop_reason?: string | null };

describe("OpenAI-compatible endpoints driven by the openai client", () => {
  it("lists and retrieves the served models", async () => {
    const list = await openai.models.list();
    expect(list.data.map((m) => [m.id, m.object, m.owned_by])).toEqual([
      ["tiny", "model", "nexrl"],
      ["cat", "model", "nexrl"],
    ]);
    expect((await openai.models.retrieve("cat")).id).toBe("cat");
    await expect(openai.models.retrieve("nope")).rejects.toMatchObject({ status: 404, code: "model_not_found" });
  });

  it("completes a text prompt with the ids and logprobs the sampler produced", async () => {
    const before = tiny.calls.length;
    const response = await openai.completions.create({
      model: "tiny",
      prompt: "igpay",
      max_tokens: 12,
      seed: 7,
      logprobs: 1,
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const call = tiny.calls[before]!;
    const [sequence] = call.output.sequences;
    const choice = response.choices[0] as CompletionChoice;
    expect(call.prompt).toEqual(tokenizer.encode("igpay", { addBos: true }));
    expect(call.params).toEqual({ maxTokens: 12, seed: 7 });
    expect(choice.prompt_token_ids).toEqual(call.prompt);
    expect(choice.token_ids).toEqual(sequence!.tokens);
    expect(choice.text).toBe(tokenizer.decode(sequence!.tokens));
    expect(choice.finish_reason).toBe(sequence!.stopReason);
    expect(choice.logprobs!.token_logprobs).toEqual(sequence!.logprobs);
    expect(choice.logprobs!.tokens).toEqual(sequence!.tokens.map((t) => tokenizer.decode([t])));
    expect(choice.logprobs!.top_logprobs).toEqual(
      sequence!.tokens.map((t, i) => ({ [tokenizer.decode([t])]: sequence!.logprobs[i] })),
    );
    expect(response.object).toBe("text_completion");
    expect(response.usage).toEqual({
      prompt_tokens: 6,
      completion_tokens: sequence!.tokens.length,
      total_tokens: 6 + sequence!.tokens.length,
    });
  });

  it("takes token-id prompts and batches, returns n choices per prompt, and writes tokens as token_id:<n> on request", async () => {
    const before = tiny.calls.length;
    const prompt = [256, 104, 105];
    const response = await openai.completions.create({
      model: "tiny",
      prompt: [prompt, [256, 120]],
      n: 3,
      max_tokens: 5,
      seed: 3,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(tiny.calls.slice(before).map((c) => [c.prompt, c.numSamples])).toEqual([
      [prompt, 3],
      [[256, 120], 3],
    ]);
    const sequences = tiny.calls.slice(before).flatMap((c) => c.output.sequences);
    expect(response.choices.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
    response.choices.forEach((choice, i) => {
      expect(choice.logprobs!.tokens).toEqual(sequences[i]!.tokens.map((t) => `token_id:${t}`));
      expect((choice as CompletionChoice).token_ids).toBeUndefined();
    });
    expect(new Set(sequences.slice(0, 3).map((s) => s.tokens.join(","))).size).toBeGreaterThan(1);
    expect(response.usage!.prompt_tokens).toBe(5);
  });

  it("stops at stop strings, cutting them from the text unless include_stop_str_in_output", async () => {
    const greedy = await openai.completions.create({ model: "cat", prompt: "the ", max_tokens: 24, temperature: 0 });
    expect(greedy.choices[0]!.text.startsWith("cat sat ")).toBe(true);
    expect(greedy.choices[0]!.finish_reason).toBe("length");
    const stopped = await openai.completions.create({
      model: "cat",
      prompt: "the ",
      max_tokens: 24,
      temperature: 0,
      stop: [" sat", "zzz"],
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const choice = stopped.choices[0] as CompletionChoice;
    expect([choice.text, choice.finish_reason, choice.stop_reason]).toEqual(["cat", "stop", " sat"]);
    expect(tokenizer.decode(choice.token_ids!)).toBe("cat sat");
    const kept = await openai.completions.create({
      model: "cat",
      prompt: "the ",
      max_tokens: 24,
      temperature: 0,
      stop: " sat",
      include_stop_str_in_output: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(kept.choices[0]!.text).toBe("cat sat");
  });

  it("answers chats through the chat template with token ids and logprobs", async () => {
    const before = cat.calls.length;
    const messages = [
      { role: "system" as const, content: "be brief" },
      { role: "user" as const, content: "the " },
    ];
    const response = (await openai.chat.completions.create({
      model: "cat",
      messages,
      max_tokens: 10,
      seed: 11,
      n: 2,
      logprobs: true,
      top_logprobs: 1,
      return_token_ids: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)) as OpenAI.ChatCompletion & VllmTokenIdFields;
    const call = cat.calls[before]!;
    expect(call.prompt).toEqual(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
    expect(response.prompt_token_ids).toEqual(call.prompt);
    expect(call.numSamples).toBe(2);
    expect(response.choices).toHaveLength(2);
    response.choices.forEach((c, i) => {
      const choice = c as ChatChoice;
      const sequence = call.output.sequences[i]!;
      expect(choice.index).toBe(i);
      expect(choice.message).toEqual({ role: "assistant", content: tokenizer.decode(sequence.tokens), refusal: null });
      expect(choice.token_ids).toEqual(sequence.tokens);
      expect(choice.logprobs!.content!.map((e) => e.logprob)).toEqual(sequence.logprobs);
      const first = choice.logprobs!.content![0]!;
      expect(first.bytes).toEqual([...Buffer.from(first.token, "utf8")]);
      expect(first.top_logprobs).toEqual([{ token: first.token, logprob: first.logprob, bytes: first.bytes }]);
    });
    expect(response.object).toBe("chat.completion");
    expect(response.usage!.prompt_tokens).toBe(call.prompt.length);
  });

  it("streams chat chunks whose text, ids and logprobs add up to the unstreamed answer, ending in [DONE]", async () => {
    for (const model of ["cat", "tiny"]) {
      const request = {
        model,
        messages: [{ role: "user" as const, content: "the " }],
        max_tokens: 16,
        seed: 5,
        logprobs: true,
        return_token_ids: true,
      };
      const whole = (await openai.chat.completions.create(request as OpenAI.ChatCompletionCreateParamsNonStreaming))
        .choices[0] as ChatChoice;
      const stream = await openai.chat.completions.create({
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      } as OpenAI.ChatCompletionCreateParamsStreaming);
      const chunks: Array<OpenAI.ChatCompletionChunk & VllmTokenIdFields> = [];
      for await (const chunk of stream) chunks.push(chunk);
      const deltas = chunks.flatMap((c) => c.choices as Array<OpenAI.ChatCompletionChunk.Choice & VllmTokenIdFields>);
      expect(deltas[0]!.delta).toEqual({ role: "assistant", content: "" });
      expect(deltas.map((d) => d.delta.content ?? "").join("")).toBe(whole.message.content);
      expect(deltas.flatMap((d) => d.token_ids ?? [])).toEqual(whole.token_ids);
      expect(deltas.flatMap((d) => d.logprobs?.content?.map((e) => e.logprob) ?? [])).toEqual(
        whole.logprobs!.content!.map((e) => e.logprob),
      );
      expect(deltas.at(-1)!.finish_reason).toBe(whole.finish_reason);
      expect(chunks[0]!.prompt_token_ids).toEqual(
        tokenizer.applyChatTemplate(request.messages, { addGenerationPrompt: true }),
      );
      expect(chunks.at(-1)!.choices).toEqual([]);
      expect(chunks.at(-1)!.usage!.completion_tokens).toBe(whole.token_ids!.length);
    }
    const raw = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "cat", messages: [{ role: "user", content: "x" }], max_tokens: 3, stream: true }),
    });
    expect(raw.headers.get("content-type")).toBe("text/event-stream");
    const text = await raw.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(
      text
        .split("\n\n")
        .filter(Boolean)
        .every((event) => event.startsWith("data: ")),
    ).toBe(true);
  });

  it("streams completions with n > 1", async () => {
    const request = { model: "tiny", prompt: "ab", max_tokens: 6, seed: 9, n: 2, return_token_ids: true };
    const whole = await openai.completions.create(request as OpenAI.CompletionCreateParamsNonStreaming);
    const stream = await openai.completions.create({
      ...request,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    const texts = ["", ""];
    const ids: number[][] = [[], []];
    const finish: Array<string | null> = [null, null];
    for await (const chunk of stream) {
      for (const c of chunk.choices as CompletionChoice[]) {
        texts[c.index] += c.text;
        ids[c.index]!.push(...(c.token_ids ?? []));
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    expect(texts).toEqual(whole.choices.map((c) => c.text));
    expect(ids).toEqual(whole.choices.map((c) => (c as CompletionChoice).token_ids));
    expect(finish).toEqual(whole.choices.map((c) => c.finish_reason));
  });

  it("serves models found by resolveModel", async () => {
    const response = await openai.completions.create({ model: catPath, prompt: "the ", max_tokens: 7, temperature: 0 });
    expect(response.choices[0]!.text).toBe(
      (await openai.completions.create({ model: "cat", prompt: "the ", max_tokens: 7, temperature: 0 })).choices[0]!
        .text,
    );
  });
});

describe("OpenAI-compatible endpoint errors", () => {
  const expectError = async (
    promise: Promise<unknown>,
    status: number,
    param: string | null,
    message: RegExp,
    code: string | null = null,
  ) => {
    const error = (await promise.catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error.status).toBe(status);
    expect(error.error).toMatchObject({ type: status >= 500 ? "server_error" : "invalid_request_error", param, code });
    expect((error.error as { message: string }).message).toMatch(message);
  };

  it("answers unknown models with 404 model_not_found", async () => {
    await expectError(
      openai.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "hi" }] }),
      404,
      "model",
      /The model `gpt-9` does not exist\. Served models: tiny, cat/,
      "model_not_found",
    );
  });

  it("refuses more than one logprob per position, which the sampler cannot give, instead of answering only the sampled token", async () => {
    const calls = cat.calls.length;
    await expectError(
      openai.chat.completions.create({
        model: "cat",
        messages: [{ role: "user", content: "the " }],
        logprobs: true,
        top_logprobs: 5,
      }),
      400,
      "top_logprobs",
      /^top_logprobs: at most 1: this server reports the logprob of each sampled token and no alternatives/,
    );
    await expectError(
      openai.completions.create({ model: "cat", prompt: "the ", logprobs: 3 }),
      400,
      "logprobs",
      /^logprobs: at most 1: /,
    );
    expect(cat.calls.length).toBe(calls);
    // One is the sampled token's logprob, as documented.
    const one = await openai.completions.create({ model: "cat", prompt: "the ", logprobs: 1, max_tokens: 2, seed: 1 });
    expect(one.choices[0]!.logprobs!.top_logprobs).toHaveLength(one.choices[0]!.logprobs!.tokens!.length);
  });

  it("answers malformed requests with 400 naming the parameter", async () => {
    await expectError(
      openai.chat.completions.create({ model: "cat", messages: [] }),
      400,
      "messages",
      /messages: .*>=1/,
    );
    await expectError(
      openai.completions.create({ model: "cat", prompt: "x", temperature: -1 }),
      400,
      "temperature",
      /temperature: .*>=0/,
    );
    await expectError(
      openai.completions.create({ model: "cat", prompt: "x", max_tokens: 0 }),
      400,
      "max_tokens",
      /max_tokens/,
    );
    await expectError(
      openai.chat.completions.create({ model: "cat", messages: [{ role: "user", content: 3 }] } as never),
      400,
      "messages[0].content",
      /messages\[0\]\.content/,
    );
    await expectError(
      openai.completions.create({ model: "cat", prompt: "x", presence_penalty: 0.5 }),
      400,
      "presence_penalty",
      /presence_penalty is not supported by nexrl serve/,
    );
    await expectError(
      openai.completions.create({ model: "tiny", prompt: [256, 999] }),
      400,
      null,
      /prompt\[1\] is 999, outside the model's vocabulary 0\.\.258/,
    );
    await expectError(
      openai.completions.create({ model: "tiny", prompt: "x".repeat(200) }),
      400,
      null,
      /context length is 128/,
    );
    await expectError(
      openai.completions.create({
        model: "tiny",
        prompt: "",
        add_special_tokens: false,
      } as OpenAI.CompletionCreateParamsNonStreaming),
      400,
      "prompt",
      /encodes to no tokens/,
    );
  });

  it("answers invalid JSON, wrong methods and other routes", async () => {
    const bad = await fetch(`${baseURL}/completions`, { method: "POST", body: "{ nope" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: unknown }).error).toMatchObject({
      type: "invalid_request_error",
      message: expect.stringMatching(/^the request body is not valid JSON/),
    });
    const get = await fetch(`${baseURL}/chat/completions`);
    expect([get.status, get.headers.get("allow")]).toEqual([405, "POST"]);
    expect(((await get.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
    const other = await fetch(`${baseURL.replace(/\/v1$/, "")}/api/v1/healthz`);
    expect([other.status, await other.text()]).toEqual([404, "not mine"]);
  });

  it("answers a failing sampler with 500 and logs it", async () => {
    await expectError(
      openai.completions.create({ model: "broken", prompt: "x" }),
      500,
      null,
      /the model failed: the GPU caught fire/,
    );
    expect(
      logged.some((line) => line.includes("POST /v1/completions failed") && line.includes("the GPU caught fire")),
    ).toBe(true);
  });
});

describe("OpenAIInferenceClient against nexrl serve", () => {
  const client = (options: Partial<ConstructorParameters<typeof OpenAIInferenceClient>[0]> = {}) =>
    new OpenAIInferenceClient({ baseURL, apiKey: "sk-test-key", model: "tiny", tokenizer, maxRetries: 0, ...options });

  it("round-trips token ids: the ids it reports are the ones the sampler read and sampled, with their logprobs", async () => {
    const before = tiny.calls.length;
    const result = await client({ policyVersion: 3 }).completion("igpay", { seed: 5, maxTokens: 10 });
    const call = tiny.calls[before]!;
    expect(result.promptTokens).toEqual(call.prompt);
    expect(result.promptTokens).toEqual(tokenizer.encode("igpay", { addBos: true }));
    expect(result.responseTokens).toEqual(call.output.sequences[0]!.tokens);
    expect(result.finishReason).toBe(call.output.sequences[0]!.stopReason);
    expect(result.response).toBe(tokenizer.decode(result.responseTokens));
    expect(result.policyVersion).toBe(3);
    expect(result.retokenized).toBeUndefined();
    const rescored = await scorer.computeLogprobs([...result.promptTokens, ...result.responseTokens]);
    expect(result.logprobs).toHaveLength(result.responseTokens.length);
    rescored
      .slice(result.promptTokens.length)
      .forEach((lp, i) => expect(Math.abs(lp! - result.logprobs[i]!)).toBeLessThan(1e-4));
  });

  it("chats with the server's template, sends token-id prompts as they are, and swaps models", async () => {
    const messages = [{ role: "user", content: "the " }];
    const before = cat.calls.length;
    const chat = await client({ model: "cat" }).chat(messages, { temperature: 0, maxTokens: 8 });
    expect(chat.promptTokens).toEqual(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
    expect(chat.promptTokens).toEqual(cat.calls[before]!.prompt);
    expect(chat.responseTokens).toEqual(cat.calls[before]!.output.sequences[0]!.tokens);
    const viaCompletions = await client({ model: "cat", chatVia: "completions" }).chat(messages, {
      temperature: 0,
      maxTokens: 8,
    });
    expect(viaCompletions).toEqual(chat);

    const ids = [256, 116, 104, 101, 32];
    const swapping = client();
    swapping.setModel("cat", 60);
    const exact = await swapping.completion(ids, { temperature: 0, maxTokens: 3, stop: ["zz"] });
    expect(exact.promptTokens).toEqual(ids);
    expect(exact.response).toBe("cat");
    expect([swapping.model, swapping.policyVersion, exact.policyVersion]).toEqual(["cat", 60, 60]);
  });

  it("falls back to token_id:<n> logprob tokens when a server does not return token_ids", async () => {
    const oldServer = client({ extraBody: { return_token_ids: false } });
    const exact = await client().completion("ab", { seed: 1, maxTokens: 6 });
    expect(await oldServer.completion("ab", { seed: 1, maxTokens: 6 })).toEqual(exact);
    // A chat's prompt ids only come with return_token_ids: without them the client refuses to guess…
    await expect(oldServer.chat([{ role: "user", content: "hi" }], { seed: 1, maxTokens: 4 })).rejects.toThrow(
      UnexpectedResponseError,
    );
    await expect(oldServer.chat([{ role: "user", content: "hi" }], { seed: 1, maxTokens: 4 })).rejects.toThrow(
      /no prompt_token_ids .*vLLM >= 0\.10\.2.*chatVia: "completions".*allowRetokenize/,
    );
    // …unless allowed, and then it says so.
    const guessed = await client({ extraBody: { return_token_ids: false }, allowRetokenize: true }).chat(
      [{ role: "user", content: "hi" }],
      { seed: 1, maxTokens: 4 },
    );
    expect(guessed.retokenized).toEqual(["prompt"]);
    expect(guessed.promptTokens).toEqual(
      tokenizer.applyChatTemplate([{ role: "user", content: "hi" }], { addGenerationPrompt: true }),
    );
  });

  it("fails with the missing server options named when no token ids come back, or re-tokenises when allowed", async () => {
    const noIds = { return_token_ids: false, return_tokens_as_token_ids: false };
    await expect(client({ extraBody: noIds }).completion("ab", { seed: 2, maxTokens: 4 })).rejects.toThrow(
      /reported no response token ids: neither token_ids \(vLLM's return_token_ids\) nor logprob tokens written token_id:<n> \(return_tokens_as_token_ids\)/,
    );
    const result = await client({ model: "cat", extraBody: noIds, allowRetokenize: true }).completion("the ", {
      temperature: 0,
      maxTokens: 5,
    });
    expect(result.retokenized).toEqual(["response"]);
    expect(result.responseTokens).toEqual(tokenizer.encode(result.response));
  });
});
