/**
 * Data-parallel training and parallel sampling: 1, 2 and 3 threads agree within float
 * tolerance, a fixed thread count is bit-reproducible, samples do not depend on the thread
 * count at all, and one thread with the TypeScript kernels reproduces the single-threaded
 * engine's numbers exactly.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { crc32 } from "../../src/engine/crc32.js";
import { LocalEngine } from "../../src/engine/index.js";
import type { KernelKind } from "../../src/engine/matrix.js";
import { threadPool } from "../../src/engine/thread-pool.js";
import { TrainingCore, splitBatch } from "../../src/engine/training.js";
import { adamParams, datum, type Datum } from "../../src/wire/wire.js";
import { engineFor, lmDatum } from "./helpers.js";
import { ConfigError } from "../../src/errors.js";

const SHAPE = { dModel: 32, nLayers: 2, nHeads: 2, contextLength: 64 };
const config = resolveModelConfig(SHAPE, 259);
const TEXTS = [
  "the cat sat on the mat.",
  "pig latin is igpay atinlay",
  "x",
  "a somewhat longer line of text that spans many bytes!",
  "threads split the batch at sequence boundaries",
  "",
  "each one adds its gradients into a buffer of its own",
];

/** Datums of TEXTS (the empty one has no positions at all) with uneven weights. */
function datums(): Datum[] {
  return TEXTS.map((t) => {
    const tokens = [256, ...Buffer.from(t)];
    return datum(tokens.slice(0, -1), {
      target_tokens: tokens.slice(1),
      weights: tokens.slice(1).map((_, i) => (i % 3) * 0.5),
    });
  });
}

const adam = adamParams({ learningRate: 1e-2, weightDecay: 0.01, gradClipNorm: 1 });

// Keep the workers between tests (the last engine to close would terminate them; starting one
// through tsx's loader takes a while on a busy machine).
beforeAll(() => threadPool.acquire());
afterAll(() => threadPool.release(0));

/** Losses and final weights of 3 steps on `datums()`. */
function trainCore(
  threads: number,
  kernels: KernelKind,
  maxChunkRows?: number,
): { losses: number[]; weights: Float32Array } {
  const core = new TrainingCore(config, 3, { threads, kernels, ...(maxChunkRows && { maxChunkRows }) });
  const losses: number[] = [];
  for (let i = 0; i < 3; i++) {
    losses.push(core.run(datums(), "cross_entropy", undefined, true).metrics["loss:sum"]!);
    core.optimStep(adam);
  }
  const weights = core.weights.flat.slice();
  void core.runtime.close();
  return { losses, weights };
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  a.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - b[i]!))));
  return worst;
}

describe("splitBatch", () => {
  it("cuts at sequence boundaries into consecutive slices exceeding an equal share by less than a sequence", () => {
    const lengths = [5, 30, 1, 0, 12, 64, 7, 7, 9];
    const starts = Int32Array.from([0, ...lengths.map((_, i) => lengths.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
    const rows = starts.at(-1)!;
    const batch = { rows, tokens: new Int32Array(rows), targets: new Int32Array(rows), starts };
    for (const threads of [1, 2, 3, 5, 16]) {
      const slices = splitBatch(batch, threads);
      expect(slices).toHaveLength(threads);
      expect(slices[0]!.first).toBe(0);
      expect(slices.at(-1)!.end).toBe(lengths.length);
      slices.forEach((s, t) => {
        if (t > 0) expect(s.first).toBe(slices[t - 1]!.end);
        const sliceRows = starts[s.end]! - starts[s.first]!;
        expect(s.batch?.rows ?? 0).toBe(sliceRows);
        expect(sliceRows).toBeLessThan(rows / threads + 64);
      });
    }
  });
});

describe("data-parallel training", () => {
  it("one thread with the TypeScript kernels reproduces the single-threaded engine bit for bit", async () => {
    // Recorded with the engine before it had threads or WebAssembly kernels.
    const engine = await engineFor(SHAPE, 3, { threads: 1, kernels: "js" });
    const texts = TEXTS.slice(0, 4);
    const data = texts.map((t) => {
      const tok = engine.tokenizer.encode(t, { addBos: true });
      return datum(tok.slice(0, -1), {
        target_tokens: tok.slice(1),
        weights: tok.slice(1).map((_, i) => (i % 3) * 0.5),
      });
    });
    const losses = [];
    for (let i = 0; i < 3; i++) {
      losses.push(engine.forwardBackward(data, "cross_entropy").metrics["loss:sum"]);
      engine.optimStep(adam);
    }
    expect(losses).toEqual([274.4091942389025, 251.2208211968045, 231.97834022629897]);
    const w = engine.getWeights();
    expect(crc32(new Uint8Array(w.buffer))).toBe(3483552864);
    const prompt = engine.tokenizer.encode("the ", { addBos: true });
    const s = engine.sample(prompt, { maxTokens: 20, seed: 7, temperature: 0.7, topK: 30, topP: 0.9 }).sequences[0]!;
    expect(s.tokens).toEqual([
      115, 101, 101, 115, 109, 109, 109, 116, 103, 108, 109, 116, 108, 116, 108, 115, 109, 98, 108, 97,
    ]);
    expect(s.logprobs.slice(0, 3)).toEqual([-4.115310904982881, -4.333489396518932, -4.329900766781125]);
  });

  it.each<KernelKind>(["wasm", "js"])(
    "agrees between 1, 2 and 3 threads within float tolerance (%s kernels)",
    (kernels) => {
      const one = trainCore(1, kernels);
      for (const threads of [2, 3]) {
        const many = trainCore(threads, kernels);
        // The losses of steps 2 and 3 depend on the updates before them. (The weights themselves are
        // not compared: Adam scales the tiny gradient of a rarely used parameter up to the learning
        // rate, whatever its rounding.)
        many.losses.forEach((l, i) => expect(Math.abs(l - one.losses[i]!)).toBeLessThan(1e-6 * one.losses[i]!));
        expect(many.losses).not.toEqual(one.losses);
      }
    },
  );

  it("gives the same gradients with 2 or 3 threads as with one, in one chunk or several", () => {
    const run = (threads: number, maxChunkRows?: number): Float32Array => {
      const core = new TrainingCore(config, 5, { threads, ...(maxChunkRows && { maxChunkRows }) });
      const rl = datums().map((d) =>
        datum(
          d.model_input.chunks.flatMap((c) => (c.type === "encoded_text" ? c.tokens : [])),
          {
            target_tokens: d.loss_fn_inputs.target_tokens!.data,
            logprobs: d.loss_fn_inputs.target_tokens!.data.map(() => -5),
            advantages: d.loss_fn_inputs.target_tokens!.data.map((_, i) => (i % 2 ? 1 : -0.5)),
          },
        ),
      );
      core.run(rl, "importance_sampling", undefined, true);
      const grads = core.grads.flat.slice();
      // Every thread's own buffer is back to zero after the reduction.
      core.runtime.views.slots.forEach((slot, t) => t > 0 && expect(slot.grads!.flat.every((g) => g === 0)).toBe(true));
      void core.runtime.close();
      return grads;
    };
    const one = run(1);
    const scale = one.reduce((m, g) => Math.max(m, Math.abs(g)), 0);
    expect(scale).toBeGreaterThan(0);
    for (const threads of [2, 3]) expect(maxDiff(run(threads), one)).toBeLessThan(1e-5 * scale);
    expect(maxDiff(run(3, 64), one)).toBeLessThan(1e-5 * scale);
  });

  it("is bit-reproducible for a fixed thread count", () => {
    for (const threads of [2, 3]) {
      const a = trainCore(threads, "wasm");
      const b = trainCore(threads, "wasm");
      expect(b.losses).toEqual(a.losses);
      expect(Buffer.from(b.weights.buffer).equals(Buffer.from(a.weights.buffer))).toBe(true);
    }
  });

  it("agrees between the WebAssembly and the TypeScript kernels", () => {
    const js = trainCore(2, "js");
    const wasm = trainCore(2, "wasm");
    wasm.losses.forEach((l, i) => expect(Math.abs(l - js.losses[i]!)).toBeLessThan(1e-6 * js.losses[i]!));
  });
});

describe("parallel sampling", () => {
  it("gives the same samples whatever the thread count", async () => {
    const prompt = [256, ...Buffer.from("the ")];
    // More samples than 3 threads have lanes, of uneven lengths (stop tokens: the lowercase letters).
    const letters = Array.from({ length: 26 }, (_, i) => 97 + i);
    const options = { maxTokens: 12, seed: 11, temperature: 1.5, stop: [...letters, "e "] };
    const results = [];
    for (const threads of [1, 2, 3]) {
      const engine = await engineFor(SHAPE, 4, { threads });
      results.push(engine.sample(prompt, options, 37));
    }
    const lengths = new Set(results[0]!.sequences.map((s) => s.tokens.length));
    expect(lengths.size).toBeGreaterThan(2);
    expect(results[0]!.sequences.some((s) => s.stopReason === "stop")).toBe(true);
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);
  });

  it("draws sample i from the seed's stream jumped i times, so sample 0 is the single sample", async () => {
    const engine = await engineFor(SHAPE, 4, { threads: 2 });
    const prompt = [256, ...Buffer.from("a")];
    const many = engine.sample(prompt, { maxTokens: 8, seed: 5 }, 5).sequences;
    expect(engine.sample(prompt, { maxTokens: 8, seed: 5 }).sequences[0]).toEqual(many[0]);
    expect(new Set(many.map((s) => s.tokens.join(","))).size).toBe(5);
  });
});

describe("engine options", () => {
  it("refuse thread counts and kernels that cannot be honoured", () => {
    const create = (compute: object): LocalEngine =>
      LocalEngine.create({ model: "tiny", outputDir: "unused", ...compute });
    for (const threads of [0, 1.5, -1, 257, Number.NaN]) {
      expect(() => create({ threads })).toThrow(ConfigError);
    }
    expect(() => create({ threads: 0 })).toThrow(/threads must be an integer from 1 to 256, got 0/);
    expect(() => create({ kernels: "gpu" })).toThrow(/kernels must be "wasm" or "js", got "gpu"/);
  });

  it("report the threads and kernels in use, and refuse work once closed", async () => {
    const engine = await engineFor("tiny", 0, { threads: 3, kernels: "js" });
    expect([engine.threads, engine.kernels]).toEqual([3, "js"]);
    await engine.close();
    await engine.close();
    expect(() => engine.forward([lmDatum([256, 1, 2])], "cross_entropy")).toThrow(/closed/);
  });
});
