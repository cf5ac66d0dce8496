import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { SamplerInferenceClient } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { ChatMessage, ChatTemplateOptions, ToolDefinition } from "../../src/wire/tokenizer.js";
import { adamParams, datum } from "../../src/wire/wire.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-inference-"));
  dirs.push(dir);
  const service = new LocalTrainingService({ outputDir: dir, seed: 1 });
  const tokenizer = new ByteTokenizer();
  const client = new SamplerInferenceClient({
    tokenizer,
    samplingClient: await service.createSamplingClient("tiny"),
    defaultMaxTokens: 8,
  });
  return { service, tokenizer, client };
}

describe("SamplerInferenceClient", () => {
  it("returns token-exact completions whose logprobs the sampler can recompute", async () => {
    const { service, tokenizer, client } = await setup();
    const result = await client.completion("igpay", { seed: 5, temperature: 1 });
    expect(result.promptTokens).toEqual(tokenizer.encode("igpay", { addBos: true }));
    expect(result.responseTokens.length).toBeGreaterThan(0);
    expect(result.responseTokens.length).toBeLessThanOrEqual(8);
    expect(result.logprobs).toHaveLength(result.responseTokens.length);
    expect(result.response).toBe(tokenizer.decode(result.responseTokens));
    expect(result.policyVersion).toBe(0);
    const rescored = await (
      await service.createSamplingClient("tiny")
    ).computeLogprobs([...result.promptTokens, ...result.responseTokens]);
    rescored.slice(result.promptTokens.length).forEach((lp, i) => expect(lp).toBeCloseTo(result.logprobs[i]!, 4));
    expect(await client.completion("igpay", { seed: 5 })).toEqual(result);
  });

  it("formats chats with the template and switches samplers on weight sync", async () => {
    const { service, tokenizer, client } = await setup();
    const messages = [{ role: "user", content: "hi" }];
    const chat = await client.chat(messages, { seed: 2, maxTokens: 4 });
    expect(chat.promptTokens).toEqual(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
    const trainer = await service.createTrainingClient({ baseModel: "tiny" });
    const text = tokenizer.encode("zzzzzzzzzzzz", { addBos: true });
    for (let i = 0; i < 30; i++) {
      await trainer.forwardBackward(
        [datum(text.slice(0, -1), { target_tokens: text.slice(1), weights: text.slice(1).map(() => 1) })],
        "cross_entropy",
      );
      await trainer.optimStep(adamParams({ learningRate: 3e-2 }));
    }
    const { path } = await (await trainer.saveWeightsForSampler("step_000030")).result();
    client.setSampler(await service.createSamplingClient(path), 30);
    const after = await client.completion("zzzz", { temperature: 0, maxTokens: 4 });
    expect(after.policyVersion).toBe(30);
    expect(after.response).toBe("zzzz");
  });

  it("gives chat tools and template kwargs to the tokenizer's chat template", async () => {
    const { service } = await setup();
    const seen: ChatTemplateOptions[] = [];
    class RecordingTokenizer extends ByteTokenizer {
      override applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
        seen.push(options);
        return super.applyChatTemplate(messages, options);
      }
    }
    const client = new SamplerInferenceClient({
      tokenizer: new RecordingTokenizer(),
      samplingClient: await service.createSamplingClient("tiny"),
      defaultMaxTokens: 2,
    });
    const tools: ToolDefinition[] = [{ type: "function", function: { name: "f" } }];
    await client.chat([{ role: "user", content: "hi" }], { tools, chatTemplateKwargs: { enable_thinking: false } });
    expect(seen).toEqual([{ addGenerationPrompt: true, tools, chatTemplateKwargs: { enable_thinking: false } }]);
  });

  it("honours an aborted signal", async () => {
    const { client } = await setup();
    await expect(client.completion("x", { signal: AbortSignal.abort() })).rejects.toThrow(/abort/i);
  });
});
