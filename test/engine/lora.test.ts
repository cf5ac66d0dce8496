/**
 * LoRA training of the local engine: the factors' gradients against central finite
 * differences, frozen base weights, exact resume, and that the loss falls.
 */
import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { LocalEngine } from "../../src/engine/index.js";
import { tensorViews } from "../../src/engine/params.js";
import { Rng } from "../../src/engine/prng.js";
import { readStateFile } from "../../src/engine/storage.js";
import { TrainingCore } from "../../src/engine/training.js";
import { adamParams, datum } from "../../src/wire/wire.js";
import { directionalDerivatives, engineFor, lmDatum, tempDir } from "./helpers.js";
import { ConfigError, EngineError } from "../../src/errors.js";

const config = resolveModelConfig({ dModel: 8, nLayers: 2, nHeads: 2, contextLength: 8 }, 259);
const SHAPE = { dModel: 16, nLayers: 2, nHeads: 2, contextLength: 32 };
const adam = adamParams({ learningRate: 1e-2, weightDecay: 0.01, gradClipNorm: 1 });

const SEQUENCES = [
  [256, 10, 200, 33, 7, 7, 90, 12, 5],
  [256, 44, 3, 250],
  [1, 2, 257, 100, 100, 60],
];

function train(engine: LocalEngine, steps: number): void {
  const tokens = engine.tokenizer.encode("adapters must restore exactly", { addBos: true });
  for (let i = 0; i < steps; i++) {
    engine.forwardBackward([lmDatum(tokens.slice(0, 20)), lmDatum(tokens.slice(10))], "cross_entropy");
    engine.optimStep(adam);
  }
}

const bits = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe("LoRA factor gradients match finite differences of the loss", () => {
  it("for lora_A and lora_B of every projection", () => {
    const core = new TrainingCore(config, 3, { lora: { rank: 3, alpha: 6 } });
    const lora = core.lora!;
    // Scrambled base and factors (lora_B ≠ 0, so lora_A's gradient is not zero).
    const rng = new Rng(11);
    for (let i = 0; i < lora.base.length; i++) lora.base[i] = rng.normal() * 0.4;
    for (let i = 0; i < lora.factors.length; i++) lora.factors[i] = rng.normal() * 0.3;
    lora.materialize(core.weights);
    const data = SEQUENCES.map((s, i) =>
      datum(s.slice(0, -1), { target_tokens: s.slice(1), weights: s.slice(1).map((_, t) => ((t + i) % 3) * 0.5) }),
    );
    core.run(data, "cross_entropy", undefined, true);
    lora.gradientsFrom(core.grads);
    const lossAt = (): number => {
      lora.materialize(core.weights);
      return core.run(data, "cross_entropy", undefined, false).metrics["loss:sum"]!;
    };
    const eps = 1e-2;
    let checked = 0;
    lora.targets.forEach((t, n) => {
      for (const side of ["a", "b"] as const) {
        const w = lora.factorsOf(n, lora.factors)[side];
        const g = lora.factorsOf(n, lora.grads)[side];
        const { analytic, numeric } = directionalDerivatives(w, g, rng, eps, lossAt);
        expect(
          Math.abs(numeric - analytic),
          `${t.module} lora_${side.toUpperCase()}: analytic ${analytic}, numeric ${numeric}`,
        ).toBeLessThan(1e-2 * Math.abs(analytic) + 1e-4);
        if (Math.abs(analytic) > 5e-3) checked++;
      }
    });
    expect(checked).toBeGreaterThan(12); // of 16 factor tensors
  });
});

describe("LoRA engines", () => {
  it("start as the base model, train only the factors, and the loss falls", async () => {
    const full = await engineFor(SHAPE, 4);
    const engine = await engineFor(SHAPE, 4, { lora: { rank: 4 } });
    expect(engine.lora).toEqual({ rank: 4, alpha: 32 });
    expect(full.lora).toBeNull();
    const w0 = engine.getWeights();
    expect(bits(w0).equals(bits(full.getWeights()))).toBe(true); // lora_B = 0: the base model
    const tokens = engine.tokenizer.encode("low rank, high hopes", { addBos: true });
    const first = engine.forwardBackward([lmDatum(tokens)], "cross_entropy").metrics["loss:sum"]!;
    engine.optimStep(adamParams({ learningRate: 1e-2 }));
    for (let i = 0; i < 40; i++) {
      engine.forwardBackward([lmDatum(tokens)], "cross_entropy");
      engine.optimStep(adamParams({ learningRate: 1e-2 }));
    }
    const last = engine.forward([lmDatum(tokens)], "cross_entropy").metrics["loss:sum"]!;
    // From 110.6 to about 105 here: the frozen tied embeddings of a fresh model (N(0, 0.02)) keep
    // every logit small, which bounds what the projections alone can learn.
    expect(last).toBeLessThan(first - 3);
    // Embeddings, layer norms and biases are where they started; the projections moved.
    const now = tensorViews(engine.getWeights(), engine.config);
    const was = tensorViews(w0, engine.config);
    expect(bits(now.wte).equals(bits(was.wte))).toBe(true);
    expect(bits(now.wpe).equals(bits(was.wpe))).toBe(true);
    expect(bits(now.lnfGain).equals(bits(was.lnfGain))).toBe(true);
    now.blocks.forEach((b, l) => {
      for (const key of ["ln1Gain", "ln1Bias", "bqkv", "bo", "ln2Gain", "ln2Bias", "b1", "b2"] as const)
        expect(bits(b[key]).equals(bits(was.blocks[l]![key])), `${key} of block ${l}`).toBe(true);
      for (const key of ["wqkv", "wo", "w1", "w2"] as const)
        expect(bits(b[key]).equals(bits(was.blocks[l]![key])), `${key} of block ${l}`).toBe(false);
    });
    // The state file holds the unchanged base, and W = W0 + s·(B·A)ᵀ.
    const state = await readStateFile(await engine.saveState("s", { optimizer: false }));
    const lora = state.lora!;
    expect(lora).toMatchObject({ rank: 4, alpha: 32 });
    const d = SHAPE.dModel;
    const w = now.blocks[1]!.w1; // mlp.c_fc of block 1: [d × 4d]
    // Factors per block: c_attn 4·(d + 3d), attn.c_proj 4·2d, c_fc 4·5d, mlp.c_proj 4·5d.
    const offsetA = 4 * (4 * d + 2 * d + 5 * d + 5 * d) + 4 * (4 * d + 2 * d);
    const a = lora.factors.subarray(offsetA, offsetA + 4 * d);
    const b = lora.factors.subarray(offsetA + 4 * d, offsetA + 4 * d + 4 * d * 4);
    const baseOffset = 12 * d * d + 3 * d * d + d * d; // block 0 (12d²), then c_attn and attn.c_proj of block 1
    const w0fc = lora.base.subarray(baseOffset, baseOffset + d * 4 * d);
    expect(bits(w0fc).equals(bits(was.blocks[1]!.w1))).toBe(true);
    let worst = 0;
    for (let i = 0; i < d; i++)
      for (let o = 0; o < 4 * d; o++) {
        let sum = 0;
        for (let k = 0; k < 4; k++) sum += b[o * 4 + k]! * a[k * d + i]!;
        worst = Math.max(worst, Math.abs(w0fc[i * 4 * d + o]! + (32 / 4) * sum - w[i * 4 * d + o]!));
      }
    expect(worst).toBeLessThan(1e-6);
  });

  it.each([1, 2])("save → train 2 steps equals load → train 2 steps, bit for bit, with %i threads", async (threads) => {
    const a = await engineFor(SHAPE, 1, { threads, lora: { rank: 2, alpha: 4 } });
    train(a, 3);
    const path = await a.saveState("ckpt-3", { optimizer: true });
    train(a, 2);
    const b = await engineFor(SHAPE, 99, { threads, lora: { rank: 2, alpha: 4 } });
    train(b, 1);
    b.forwardBackward([lmDatum([256, 1, 2, 3])], "cross_entropy");
    await b.loadState(path, { optimizer: true });
    expect(b.step).toBe(3);
    train(b, 2);
    expect(bits(b.getWeights()).equals(bits(a.getWeights()))).toBe(true);
    const sa = await readStateFile(await a.saveState("end", { optimizer: true }));
    const sb = await readStateFile(await b.saveState("end", { optimizer: true }));
    expect(bits(sb.lora!.factors).equals(bits(sa.lora!.factors))).toBe(true);
    expect(bits(sb.optimizer!.m).equals(bits(sa.optimizer!.m))).toBe(true);
  });

  it("serve their effective weights from a sampler snapshot", async () => {
    const engine = await engineFor(SHAPE, 2, { lora: { rank: 2 } });
    train(engine, 3);
    const path = await engine.saveWeightsForSampler("snap");
    const snapshot = await readStateFile(path);
    expect(snapshot.lora?.rank).toBe(2);
    const sampler = await LocalEngine.samplerFromSnapshot(path);
    try {
      const tokens = engine.tokenizer.encode("adapters", { addBos: true });
      expect(sampler.computeLogprobs(tokens)).toEqual(engine.computeLogprobs(tokens));
    } finally {
      await sampler.close();
    }
  });

  it("refuse a rank outside [1, dModel], and files of another LoRA config or of a full-weight model", async () => {
    const dir = await tempDir();
    for (const rank of [0, 17, 2.5])
      expect(() => LocalEngine.create({ model: SHAPE, outputDir: dir, lora: { rank } })).toThrow(ConfigError);
    expect(() => LocalEngine.create({ model: SHAPE, outputDir: dir, lora: { rank: 2, alpha: 0 } })).toThrow(
      /alpha must be a positive number/,
    );
    const full = await engineFor(SHAPE, 1);
    const lora = await engineFor(SHAPE, 1, { lora: { rank: 2 } });
    const other = await engineFor(SHAPE, 1, { lora: { rank: 3 } });
    const fullPath = await full.saveState("f", { optimizer: true });
    const loraPath = await lora.saveState("l", { optimizer: true });
    for (const [engine, path, message] of [
      [lora, fullPath, /saved from a full-weight model but this engine is a LoRA model of rank 2/],
      [full, loraPath, /saved from a LoRA model of rank 2, alpha 32 but this engine is a full-weight model/],
      [other, loraPath, /rank 2, alpha 32 but this engine is a LoRA model of rank 3/],
    ] as const) {
      const err = await engine.loadState(path, { optimizer: true }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EngineError);
      expect((err as EngineError).stateFileProblem).toBe("config_mismatch");
      expect((err as EngineError).message).toMatch(message);
    }
  });

  it("reserve their factors, moments, base and scratch on top of a full-weight engine's memory", () => {
    const full = LocalEngine.memoryBytes(SHAPE, { threads: 1 });
    const lora = LocalEngine.memoryBytes(SHAPE, { threads: 1, lora: { rank: 4 } });
    const d = SHAPE.dModel;
    const factors = 2 * 4 * (d + 3 * d + d + d + d + 4 * d + 4 * d + d);
    const base = 2 * 12 * d * d;
    const scratch = 2 * (d * 4 * d) + 2 * 4 * (4 * d); // float64 G and Gᵀ of c_fc, lora_A and lora_Bᵀ
    expect(lora - full).toBe((4 * factors + base) * 4 + scratch * 8);
  });
});
