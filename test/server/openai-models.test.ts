import { describe, expect, it } from "vitest";
import { createTrainingService } from "../../src/backends/index.js";
import { adamParams } from "../../src/wire/wire.js";
import { API_KEY, FAST, onCleanup, sftDatum } from "../support/training.js";
import { call, server } from "../support/server.js";

describe("nexrl serve --protocol all: OpenAI-compatible endpoints", () => {
  it("serves the presets by name and a snapshot saved over Tinker by its path", async () => {
    const { url } = await server();
    const models = await call(url, "GET", "/v1/models");
    expect(models.body.data.map((m: { id: string }) => m.id)).toEqual(["tiny", "small", "medium", "large"]);
    const svc = createTrainingService("tinker", { baseUrl: url, apiKey: API_KEY, ...FAST });
    onCleanup(() => svc.close());
    const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 2 });
    await client.forwardBackward([sftDatum("abab")], "cross_entropy");
    await client.optimStep(adamParams({ learningRate: 1e-2 }));
    const { path } = await (await client.saveWeightsForSampler("step_1")).result();
    const completion = await call(url, "POST", "/v1/completions", {
      model: path,
      prompt: "ab",
      max_tokens: 3,
      seed: 1,
      logprobs: 1,
      return_token_ids: true,
    });
    expect(completion.status).toBe(200);
    const [choice] = completion.body.choices;
    expect(completion.body.model).toBe(path);
    expect(choice.token_ids.length).toBeGreaterThan(0);
    // The snapshot scores the sampled tokens through the Tinker sampler as the OpenAI endpoint did.
    const sampler = await svc.createSamplingClient(path);
    const scored = await sampler.computeLogprobs([...choice.prompt_token_ids, ...choice.token_ids]);
    choice.logprobs.token_logprobs.forEach((lp: number, i: number) =>
      expect(lp).toBeCloseTo(scored[choice.prompt_token_ids.length + i]!, 4),
    );
    const unknown = await call(url, "POST", "/v1/completions", {
      model: "tinker://nobody/sampler_weights/x",
      prompt: "ab",
      max_tokens: 1,
    });
    expect(unknown.status).toBe(404);
  });

  it("serves only OpenAI-compatible routes with --protocol openai", async () => {
    const { url } = await server({ protocol: "openai" });
    expect((await call(url, "GET", "/v1/models")).status).toBe(200);
    expect((await call(url, "POST", "/api/v1/sessions", { tags: [], sdk_version: "x" })).status).toBe(404);
  });
});
