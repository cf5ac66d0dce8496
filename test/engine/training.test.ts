import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { LocalEngine, MODEL_PRESETS } from "../../src/engine/index.js";
import { TrainingCore } from "../../src/engine/training.js";
import { adamParams, datum } from "../../src/wire/wire.js";
import { engineFor, lmDatum, pigLatinDatums } from "./helpers.js";
import { ConfigError, ContextLengthError, EngineError, InputError } from "../../src/errors.js";

const small = resolveModelConfig({ dModel: 16, nLayers: 2, nHeads: 2, contextLength: 32 }, 259);
const texts = ["alpha beta gamma", "the quick brown fox", "x", "zeta eta theta iota kappa"];

describe("engine configuration", () => {
  it("resolves presets and explicit shapes with the tokenizer's vocabulary", async () => {
    const tiny = await engineFor("tiny");
    expect(tiny.config).toEqual({ ...MODEL_PRESETS.tiny, vocabSize: 259 });
    expect((await engineFor("small")).config.dModel).toBe(128);
    expect(
      (await engineFor({ dModel: 8, nLayers: 1, nHeads: 2, contextLength: 4, vocabSize: 300 })).config.vocabSize,
    ).toBe(300);
  });

  it("refuses unknown presets and invalid shapes", () => {
    const create = (model: never): LocalEngine => LocalEngine.create({ model, outputDir: "unused" });
    expect(() => create("huge" as never)).toThrow(ConfigError);
    expect(() => create("huge" as never)).toThrow(/tiny, small/);
    expect(() => create({ dModel: 10, nLayers: 1, nHeads: 3, contextLength: 8 } as never)).toThrow(
      /multiple of nHeads/,
    );
    expect(() => create({ dModel: 8, nLayers: 0, nHeads: 2, contextLength: 8 } as never)).toThrow(
      /nLayers must be a positive integer/,
    );
    expect(() => create({ dModel: 8, nLayers: 1, nHeads: 2, contextLength: 8, vocabSize: 100 } as never)).toThrow(
      /smaller than the tokenizer/,
    );
  });

  it("initialises identically for the same seed and differently for another", async () => {
    expect((await engineFor("tiny", 5)).getWeights()).toEqual((await engineFor("tiny", 5)).getWeights());
    expect((await engineFor("tiny", 5)).getWeights()).not.toEqual((await engineFor("tiny", 6)).getWeights());
  });
});

describe("forward and forwardBackward", () => {
  it("returns per-datum target logprobs and the summed loss", async () => {
    const engine = await engineFor("tiny");
    const datums = texts.map((t) => lmDatum(engine.tokenizer.encode(t, { addBos: true })));
    const out = engine.forward(datums, "cross_entropy");
    expect(out.lossFnOutputs.map((o) => o.logprobs.length)).toEqual(texts.map((t) => Buffer.byteLength(t)));
    const all = out.lossFnOutputs.flatMap((o) => o.logprobs);
    for (const lp of all) expect(lp).toBeLessThan(0);
    // Near uniform at initialisation.
    expect(all.reduce((a, b) => a + b, 0) / all.length).toBeCloseTo(-Math.log(259), 0);
    expect(out.metrics["loss:sum"]).toBeCloseTo(-all.reduce((a, b) => a + b, 0), 6);
    // Each datum's logprobs do not depend on what else is in the batch.
    const alone = engine.forward([datums[1]!], "cross_entropy").lossFnOutputs[0]!.logprobs;
    alone.forEach((lp, i) => expect(lp).toBeCloseTo(out.lossFnOutputs[1]!.logprobs[i]!, 5));
  });

  it("forward touches no gradients; forwardBackward accumulates across calls like one call", () => {
    const a = new TrainingCore(small, 1);
    const b = new TrainingCore(small, 1);
    const tok = (t: string): number[] => [256, ...Buffer.from(t)];
    const datums = texts.map((t) => lmDatum(tok(t)));
    a.run(datums, "cross_entropy", undefined, false);
    expect(a.grads.flat.every((g) => g === 0)).toBe(true);
    a.run(datums.slice(0, 1), "cross_entropy", undefined, true);
    a.run(datums.slice(1), "cross_entropy", undefined, true);
    b.run(datums, "cross_entropy", undefined, true);
    const scale = b.grads.flat.reduce((m, g) => Math.max(m, Math.abs(g)), 0);
    expect(scale).toBeGreaterThan(0);
    let worst = 0;
    a.grads.flat.forEach((g, i) => (worst = Math.max(worst, Math.abs(g - b.grads.flat[i]!))));
    expect(worst).toBeLessThan(1e-5 * scale);
  });

  it("runs calls longer than the chunk limit in chunks with the same results", () => {
    const whole = new TrainingCore(small, 1);
    const chunked = new TrainingCore(small, 1, { maxChunkRows: 24 }); // at least one context (32 rows) per chunk
    const datums = [...texts, ...texts].map((t) => lmDatum([256, ...Buffer.from(t)]));
    const a = whole.run(datums, "cross_entropy", undefined, true);
    const b = chunked.run(datums, "cross_entropy", undefined, true);
    expect(b.lossFnOutputs).toEqual(a.lossFnOutputs);
    expect(b.metrics["loss:sum"]).toBeCloseTo(a.metrics["loss:sum"]!, 9);
    const scale = whole.grads.flat.reduce((m, g) => Math.max(m, Math.abs(g)), 0);
    chunked.grads.flat.forEach((g, i) => expect(Math.abs(g - whole.grads.flat[i]!)).toBeLessThan(1e-5 * scale));
  });

  it("applies the loss contract: unknown and Weaver-only losses, missing or extra inputs, config keys", async () => {
    const engine = await engineFor("tiny");
    const tokens = [256, 1, 2, 3];
    const ce = lmDatum(tokens);
    expect(() => engine.forward([ce], "nope")).toThrow(InputError);
    expect(() => engine.forward([], "surrogate")).toThrow(/not available on the local engine/);
    expect(() => engine.forward([ce], "ppo")).toThrow(/missing loss input "logprobs"/);
    const masked = datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: [1, 1, 1], mask: [1, 1, 1] });
    expect(() => engine.forward([masked], "cross_entropy")).toThrow(/"mask" is rejected/);
    const rl = datum(tokens.slice(0, -1), {
      target_tokens: tokens.slice(1),
      logprobs: [-1, -1, -1],
      advantages: [1, 0, -1],
    });
    expect(() => engine.forward([rl], "ppo", { beta: 1 })).toThrow(/"beta" is not used by ppo/);
    expect(engine.forward([rl], "ppo", { clip_low_threshold: 0.9 }).lossFnOutputs[0]!.logprobs).toHaveLength(3);
    expect(engine.forward([], "cross_entropy")).toEqual({ lossFnOutputs: [], metrics: { "loss:sum": 0 } });
  });

  it("refuses datums longer than the context, naming the datum and both lengths", async () => {
    const engine = await engineFor({ dModel: 8, nLayers: 1, nHeads: 2, contextLength: 8 });
    const ok = lmDatum([256, 1, 2, 3, 4, 5, 6, 7, 8]);
    const long = lmDatum([256, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(engine.forward([ok], "cross_entropy").lossFnOutputs[0]!.logprobs).toHaveLength(8);
    expect(() => engine.forwardBackward([ok, long], "cross_entropy")).toThrow(ContextLengthError);
    expect(() => engine.forwardBackward([ok, long], "cross_entropy")).toThrow(
      "datum 1 has 9 tokens but the model's context length is 8",
    );
  });

  it("refuses token ids outside the vocabulary", async () => {
    const engine = await engineFor("tiny");
    expect(() => engine.forward([lmDatum([256, 259, 1])], "cross_entropy")).toThrow(InputError);
    expect(() =>
      engine.forward([datum([256, 1], { target_tokens: [1, 400], weights: [1, 1] })], "cross_entropy"),
    ).toThrow(/target_tokens\[1\] is 400/);
  });
});

describe("optimStep", () => {
  it("reports the pre-clip gradient norm and step, clips, and clears the gradients", () => {
    const core = new TrainingCore(small, 2);
    const d = [lmDatum([256, ...Buffer.from("clip me please")])];
    core.run(d, "cross_entropy", undefined, true);
    const g = Float64Array.from(core.grads.flat);
    const norm = Math.hypot(...g);
    const before = core.weights.flat.slice();
    const { metrics } = core.optimStep(adamParams({ learningRate: 0.1, gradClipNorm: norm / 4 }));
    expect(metrics["grad_norm:mean"]).toBeCloseTo(norm, 4);
    expect(metrics["step:max"]).toBe(1);
    expect(metrics["learning_rate:mean"]).toBe(0.1);
    expect(core.grads.flat.every((x) => x === 0)).toBe(true);
    // The first moment saw the clipped gradient: m = (1 − β1)·g/4.
    const i = g.length - 1; // the final layer-norm bias always has a gradient
    expect(Math.abs(g[i]!)).toBeGreaterThan(1e-4);
    expect(core.adam.m[i]! / g[i]!).toBeCloseTo(0.1 / 4, 5);
    expect(core.weights.flat).not.toEqual(before);
  });

  it("follows AdamW with decoupled weight decay and bias correction exactly", () => {
    const core = new TrainingCore(small, 3);
    const d = [lmDatum([256, ...Buffer.from("adam")])];
    core.run(d, "cross_entropy", undefined, true);
    const g = Float64Array.from(core.grads.flat);
    const p0 = Float64Array.from(core.weights.flat);
    const adam = adamParams({ learningRate: 0.01, weightDecay: 0.1, eps: 1e-8 });
    core.optimStep(adam);
    for (const i of [0, 5000, p0.length - 1]) {
      const m = 0.1 * g[i]!;
      const v = 0.05 * g[i]! ** 2;
      const expected = p0[i]! * (1 - 0.01 * 0.1) - ((0.01 / 0.1) * m) / (Math.sqrt(v) / Math.sqrt(0.05) + 1e-8);
      expect(core.weights.flat[i]).toBeCloseTo(expected, 6);
    }
  });

  it("validates Adam parameters and refuses a non-finite gradient without touching the weights", () => {
    const core = new TrainingCore(small, 4);
    expect(() => core.optimStep({ ...adamParams(), beta1: 1 })).toThrow(InputError);
    const tokens = [256, 1, 2];
    core.run(
      [datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), logprobs: [-1e30, -1], advantages: [1, 1] })],
      "importance_sampling",
      undefined,
      true,
    );
    const before = core.weights.flat.slice();
    expect(() => core.optimStep(adamParams())).toThrow(EngineError);
    expect(core.weights.flat).toEqual(before);
    expect(core.grads.flat.every((g) => g === 0)).toBe(true);
    expect(core.adam.step).toBe(0);
  });

  it("refuses a step whose learning rate would overflow the weights, changing nothing, and takes a sane one after", () => {
    const core = new TrainingCore(small, 4);
    const tokens = [256, 1, 2];
    const sft = () =>
      core.run(
        [datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: [1, 1] })],
        "cross_entropy",
        undefined,
        true,
      );
    sft();
    const weights = core.weights.flat.slice();
    const moments = core.adam.m.slice();
    let error: unknown;
    try {
      core.optimStep(adamParams({ learningRate: 1e308 }));
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).problem).toBe("non_finite_update");
    expect((error as Error).message).toMatch(
      /^the optimizer step with learning rate 1e\+308 would make weights overflow a 32-bit float \(weight \d+ first\), so it was skipped and the gradients discarded; lower the learning rate/,
    );
    expect(core.weights.flat).toEqual(weights);
    expect(core.adam.m).toEqual(moments);
    expect([core.adam.step, core.grads.flat.every((g) => g === 0)]).toEqual([0, true]);
    sft();
    expect(core.optimStep(adamParams({ learningRate: 1e-3 })).metrics["step:max"]).toBe(1);
    expect(core.weights.flat.every(Number.isFinite)).toBe(true);
    expect(core.weights.flat).not.toEqual(weights);
  });
});

describe("SFT smoke test", () => {
  it("halves the per-token loss of pig-latin replies", async () => {
    const engine = await engineFor("tiny", 7);
    const datums = pigLatinDatums(engine);
    const weight = datums.reduce((n, d) => n + d.loss_fn_inputs.weights!.data.reduce((a, b) => a + b, 0), 0);
    const perToken = (): number => engine.forward(datums, "cross_entropy").metrics["loss:sum"]! / weight;
    const initial = perToken();
    const adam = adamParams({ learningRate: 3e-3 });
    for (let step = 0; step < 40; step++) {
      engine.forwardBackward(datums, "cross_entropy");
      engine.optimStep(adam);
    }
    const final = perToken();
    expect(initial).toBeGreaterThan(5);
    expect(final).toBeLessThan(initial / 2);
    expect(engine.step).toBe(40);
  });
});
