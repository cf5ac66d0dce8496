/**
 * The contract every training service meets, run against each backend: the local engine in
 * process, and `nexrl serve` over HTTP through the tinker and weaver clients.
 */
import { describe, expect, it } from "vitest";
import type { TrainingBackend, TrainingClient } from "../../src/contracts/training.js";
import { adamParams, modelInputFromTokens } from "../../src/wire/wire.js";
import { service, sftDatum, tokens } from "../support/training.js";

const SFT = [sftDatum("igpay atinlay"), sftDatum("ellohay orldway")];
// Small enough that the loss falls at every step for LoRA too (Tinker's models, Weaver's default).
const ADAM = adamParams({ learningRate: 3e-3 });

async function step(client: TrainingClient): Promise<number> {
  const fb = await client.forwardBackward(SFT, "cross_entropy");
  await (await client.optimStep(ADAM)).result();
  return (await fb.result()).metrics["loss:sum"]!;
}

async function logprobs(client: TrainingClient): Promise<number[][]> {
  return (await (await client.forward(SFT, "cross_entropy")).result()).lossFnOutputs.map((o) => o.logprobs);
}

describe.each<TrainingBackend>(["local", "tinker", "weaver"])("training service contract: %s", (backend) => {
  it("lowers the loss with SFT steps", async () => {
    const client = await (await service(backend)).createTrainingClient({ baseModel: "tiny", seed: 7 });
    const losses: number[] = [];
    for (let i = 0; i < 4; i++) losses.push(await step(client));
    const after = (await (await client.forward(SFT, "cross_entropy")).result()).metrics["loss:sum"]!;
    for (let i = 1; i < losses.length; i++) expect(losses[i]).toBeLessThan(losses[i - 1]!);
    expect(after).toBeLessThan(losses.at(-1)!);
    expect((await client.getInfo()).baseModel).toBe("tiny");
  });

  it("samples from saved weights with logprobs that match computeLogprobs and forward", async () => {
    const svc = await service(backend);
    const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 7 });
    await step(client);
    const { path } = await (await client.saveWeightsForSampler("step_000001")).result();
    const forward = await logprobs(client);
    await step(client); // training goes on; the snapshot keeps the weights it saved
    const sampler = await svc.createSamplingClient(path);
    const full = tokens("igpay atinlay");
    const scored = await sampler.computeLogprobs(full);
    expect(scored[0]).toBeNull();
    scored.slice(1).forEach((lp, i) => expect(lp).toBeCloseTo(forward[0]![i]!, 4));

    const prompt = full.slice(0, 4);
    const { sequences } = await (
      await sampler.sample(modelInputFromTokens(prompt), 2, { maxTokens: 6, seed: 3, temperature: 1 })
    ).result();
    expect(sequences).toHaveLength(2);
    for (const s of sequences) {
      expect(s.tokens.length).toBeGreaterThan(0);
      expect(s.logprobs).toHaveLength(s.tokens.length);
      const again = await sampler.computeLogprobs([...prompt, ...s.tokens]);
      s.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(again[prompt.length + i]!, 4));
    }
    const repeat = await (
      await sampler.sample(modelInputFromTokens(prompt), 2, { maxTokens: 6, seed: 3, temperature: 1 })
    ).result();
    expect(repeat.sequences).toEqual(sequences);
  });

  it("continues bit-identically after loadState with the optimizer", async () => {
    const svc = await service(backend);
    const a = await svc.createTrainingClient({ baseModel: "tiny", seed: 7 });
    await step(a);
    await step(a);
    const { path } = await (await a.saveState("ckpt", { kind: "weights_and_optimizer" })).result();
    await step(a);
    const lastA = await a.optimStep(ADAM); // no gradients: Adam still moves the weights with its moments
    const b = await svc.createTrainingClient({ baseModel: "tiny", seed: 99 });
    expect(await logprobs(b)).not.toEqual(await logprobs(a));
    await (await b.loadState(path, { optimizer: true })).result();
    await step(b);
    const lastB = await b.optimStep(ADAM);
    expect((await lastA.result()).metrics["step:max"]).toBe(4);
    expect((await lastB.result()).metrics["step:max"]).toBe(4);
    expect(await logprobs(b)).toEqual(await logprobs(a));
  });

  it("keeps the order of pipelined submits", async () => {
    const svc = await service(backend);
    const pipelined = await svc.createTrainingClient({ baseModel: "tiny", seed: 5 });
    const sequential = await svc.createTrainingClient({ baseModel: "tiny", seed: 5 });
    const futures = [];
    for (let i = 0; i < 3; i++)
      futures.push(await pipelined.forwardBackward(SFT, "cross_entropy"), await pipelined.optimStep(ADAM));
    const final = await pipelined.forward(SFT, "cross_entropy");
    const results = await Promise.all(futures.map((f) => f.result()));
    const pipelinedLosses = results.filter((_, i) => i % 2 === 0).map((r) => r.metrics["loss:sum"]);
    const sequentialLosses = [await step(sequential), await step(sequential), await step(sequential)];
    expect(pipelinedLosses).toEqual(sequentialLosses);
    expect((await final.result()).lossFnOutputs.map((o) => o.logprobs)).toEqual(await logprobs(sequential));
  });
});
