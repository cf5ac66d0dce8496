import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { adamParams, datum, modelInputFromTokens, type Datum } from "../../src/wire/wire.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function service(options: { engineHosts?: boolean } = {}): Promise<LocalTrainingService> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-local-service-"));
  dirs.push(dir);
  return new LocalTrainingService({ outputDir: dir, seed: 3, ...options });
}

const text = [...Buffer.from("igpay atinlay")];
const sft: Datum = datum(text.slice(0, -1), { target_tokens: text.slice(1), weights: text.slice(1).map(() => 1) });

describe("LocalTrainingService", () => {
  it("runs forwardBackward and optimStep submitted back to back, in order", async () => {
    const svc = await service();
    const client = await svc.createTrainingClient({ baseModel: "tiny" });
    const before = await (await client.forward([sft], "cross_entropy")).result();
    // Submit three steps without awaiting any result; the queue keeps seq order.
    const futures = [];
    for (let i = 0; i < 3; i++) {
      futures.push(
        await client.forwardBackward([sft], "cross_entropy"),
        await client.optimStep(adamParams({ learningRate: 1e-2 })),
      );
    }
    const after = await client.forward([sft], "cross_entropy");
    const results = await Promise.all(futures.map((f) => f.result()));
    const losses = results
      .filter((_, i) => i % 2 === 0)
      .map((r) => (r as { metrics: Record<string, number> }).metrics["loss:sum"]!);
    expect(losses[0]).toBeCloseTo(before.metrics["loss:sum"]!, 4);
    expect(losses[2]).toBeLessThan(losses[0]!);
    expect((await after.result()).metrics["loss:sum"]).toBeLessThan(losses[2]!);
    expect(before.lossFnOutputs[0]!.logprobs).toHaveLength(text.length - 1);
  });

  it("serves a sampler snapshot whose logprobs match forward, while training goes on", async () => {
    const svc = await service();
    const client = await svc.createTrainingClient({ baseModel: "tiny" });
    await (await client.forwardBackward([sft], "cross_entropy")).result();
    await (await client.optimStep(adamParams({ learningRate: 1e-2 }))).result();
    const { path } = await (await client.saveWeightsForSampler("step_000001")).result();
    const sampler = await svc.createSamplingClient(path);
    const forward = await (await client.forward([sft], "cross_entropy")).result();
    await (await client.forwardBackward([sft], "cross_entropy")).result();
    await (await client.optimStep(adamParams({ learningRate: 1e-2 }))).result();
    const logprobs = await sampler.computeLogprobs(text);
    expect(logprobs[0]).toBeNull();
    logprobs.slice(1).forEach((lp, i) => expect(lp).toBeCloseTo(forward.lossFnOutputs[0]!.logprobs[i]!, 4));
    const sample = await (
      await sampler.sample(modelInputFromTokens(text.slice(0, 4)), 2, { maxTokens: 5, seed: 1, stop: ["\n"] })
    ).result();
    expect(sample.sequences).toHaveLength(2);
    for (const s of sample.sequences) {
      expect(s.tokens.length).toBe(s.logprobs.length);
      expect(["stop", "length"]).toContain(s.stopReason);
    }
  });

  it("restores a weights_and_optimizer state exactly", async () => {
    const svc = await service();
    const a = await svc.createTrainingClient({ baseModel: "tiny" });
    await (await a.forwardBackward([sft], "cross_entropy")).result();
    await (await a.optimStep(adamParams({ learningRate: 1e-2 }))).result();
    const { path } = await (await a.saveState("ckpt", { kind: "weights_and_optimizer" })).result();
    const b = await svc.createTrainingClient({ baseModel: "tiny", seed: 99 });
    await (await b.loadState(path, { optimizer: true })).result();
    for (const c of [a, b]) {
      await c.forwardBackward([sft], "cross_entropy");
      await c.optimStep(adamParams({ learningRate: 1e-2 }));
    }
    const [la, lb] = await Promise.all(
      [a, b].map(async (c) => (await (await c.forward([sft], "cross_entropy")).result()).metrics["loss:sum"]),
    );
    expect(lb).toBe(la);
    expect((await b.getInfo()).modelId).not.toBe((await a.getInfo()).modelId);
  });

  it("reports a failed operation through result() and keeps serving later ones", async () => {
    const svc = await service();
    const client = await svc.createTrainingClient({ baseModel: "tiny" });
    const bad = await client.forwardBackward([datum([1, 2], { target_tokens: [2, 3] })], "cross_entropy");
    const good = await client.forward([sft], "cross_entropy");
    await expect(bad.result()).rejects.toThrow('missing loss input "weights"');
    expect((await good.result()).metrics["loss:sum"]).toBeGreaterThan(0);
    await expect(svc.createTrainingClient({ baseModel: "Qwen/Qwen3-8B" })).rejects.toThrow(
      'unknown model preset "Qwen/Qwen3-8B"',
    );
  });
  it("gives the same results with engineHosts, its engines and samplers computing in threads of their own", async () => {
    const results = [];
    for (const engineHosts of [false, true]) {
      const svc = await service({ engineHosts });
      const client = await svc.createTrainingClient({ baseModel: "tiny" });
      const fb = await (await client.forwardBackward([sft], "cross_entropy")).result();
      const step = await (await client.optimStep(adamParams({ learningRate: 1e-2 }))).result();
      const { path } = await (await client.saveWeightsForSampler("step_1")).result();
      const snapshot = await svc.createSamplingClient(path);
      const params = { maxTokens: 8, seed: 4 };
      const sampled = await (await snapshot.sample(modelInputFromTokens([256, 1, 2]), 3, params)).result();
      const base = await svc.createSamplingClient("tiny");
      const scored = await base.computeLogprobs(text);
      const info = await client.getInfo();
      await svc.close();
      results.push({ fb, step, sampled, scored, info: { ...info, modelId: undefined } });
    }
    expect(results[1]).toEqual(results[0]);
    expect(results[0]!.sampled.sequences).toHaveLength(3);
  });
});
