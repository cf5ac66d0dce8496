import { beforeAll, describe, expect, it } from "vitest";
import { type LocalEngine } from "../../src/engine/index.js";
import { datum } from "../../src/wire/wire.js";
import { engineFor, OVERFIT_TEXT, overfitEngine } from "./helpers.js";
import { ContextLengthError, InputError } from "../../src/errors.js";

/** Target logprobs of `tokens[1..]` from the training forward pass. */
function forwardLogprobs(engine: LocalEngine, tokens: number[]): number[] {
  const d = datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: tokens.slice(1).map(() => 0) });
  return engine.forward([d], "cross_entropy").lossFnOutputs[0]!.logprobs;
}

describe("sampling on an untrained model", () => {
  let engine: LocalEngine;
  let prompt: number[];
  beforeAll(async () => {
    engine = await engineFor("tiny", 4);
    prompt = engine.tokenizer.encode("Once upon", { addBos: true });
  });

  it("reports each token's logprob at temperature 1, equal to forward and computeLogprobs within 1e-4", () => {
    for (const options of [{ temperature: 1 }, { temperature: 0.5, topK: 20, topP: 0.8 }, { temperature: 0 }]) {
      const { sequences } = engine.sample(prompt, { maxTokens: 24, seed: 9, ...options });
      const s = sequences[0]!;
      expect(s.tokens.length).toBeGreaterThan(0);
      const all = [...prompt, ...s.tokens];
      const fwd = forwardLogprobs(engine, all).slice(prompt.length - 1);
      const scored = engine.computeLogprobs(all).slice(prompt.length);
      s.logprobs.forEach((lp, i) => {
        expect(Math.abs(lp - fwd[i]!)).toBeLessThan(1e-4);
        expect(Math.abs(lp - scored[i]!)).toBeLessThan(1e-4);
      });
    }
  });

  it("sampleAsync draws what sample draws, even when other calls use the sampler while it pauses", async () => {
    const other = engine.tokenizer.encode("something else entirely", { addBos: true });
    const options = { maxTokens: 24, seed: 5, temperature: 1 };
    const expected = engine.sample(prompt, options, 64);
    const expectedOther = engine.sample(other, { ...options, seed: 6 }, 3);
    const scores = engine.computeLogprobs(other);
    // More samples than the threads decode side by side, so it pauses between batches; a logprob
    // call and another sampling call run in its pauses.
    const sampled = engine.sampleAsync(prompt, options, 64);
    let interleaved: Array<number | null> | undefined;
    setImmediate(() => (interleaved = engine.computeLogprobs(other)));
    const concurrent = engine.sampleAsync(other, { ...options, seed: 6 }, 3);
    expect(await sampled).toEqual(expected);
    expect(await concurrent).toEqual(expectedOther);
    expect(interleaved).toEqual(scores);
  });

  it("computeLogprobs has null at index 0 and matches forward everywhere", () => {
    const tokens = engine.tokenizer.encode("a longer sequence to score, with ünïcode", { addBos: true });
    const scored = engine.computeLogprobs(tokens);
    expect(scored).toHaveLength(tokens.length);
    expect(scored[0]).toBeNull();
    const fwd = forwardLogprobs(engine, tokens);
    fwd.forEach((lp, i) => expect(Math.abs(lp - scored[i + 1]!)).toBeLessThan(1e-4));
    expect(engine.computeLogprobs([])).toEqual([]);
  });

  it("is deterministic under a seed and draws different samples from one stream", () => {
    const a = engine.sample(prompt, { maxTokens: 16, seed: 123 }, 3);
    const b = engine.sample(prompt, { maxTokens: 16, seed: 123 }, 3);
    expect(b).toEqual(a);
    const distinct = new Set(a.sequences.map((s) => s.tokens.join(",")));
    expect(distinct.size).toBe(3);
    const c = engine.sample(prompt, { maxTokens: 16, seed: 124 }, 3);
    expect(c).not.toEqual(a);
    // The first sample of a batch is the single sample of the same seed.
    expect(engine.sample(prompt, { maxTokens: 16, seed: 123 }).sequences[0]).toEqual(a.sequences[0]);
  });

  it("greedy decoding equals top-k 1 and picks the argmax of the forward pass", () => {
    const greedy = engine.sample(prompt, { maxTokens: 8, temperature: 0, seed: 1 }).sequences[0]!;
    const topk = engine.sample(prompt, { maxTokens: 8, temperature: 1, topK: 1, seed: 2 }).sequences[0]!;
    expect(topk.tokens).toEqual(greedy.tokens);
    const tinyTopP = engine.sample(prompt, { maxTokens: 8, topP: 1e-6, seed: 3 }).sequences[0]!;
    expect(tinyTopP.tokens).toEqual(greedy.tokens);
    const lp = engine.computeLogprobs([...prompt, greedy.tokens[0]!]);
    for (let v = 0; v < engine.config.vocabSize; v++) {
      expect(engine.computeLogprobs([...prompt, v]).at(-1)!).toBeLessThanOrEqual(lp.at(-1)! + 1e-12);
    }
  });

  it("top-k and top-p restrict the draw to the most likely tokens", () => {
    const next = Array.from({ length: engine.config.vocabSize }, (_, v) => ({
      v,
      lp: engine.computeLogprobs([...prompt, v]).at(-1)!,
    }));
    next.sort((a, b) => b.lp - a.lp);
    const first = (options: { topK?: number; topP?: number }): Set<number> =>
      new Set(
        engine
          .sample(prompt, { maxTokens: 1, seed: 8, temperature: 3, ...options }, 200)
          .sequences.map((s) => s.tokens[0]!),
      );
    const top3 = new Set(next.slice(0, 3).map((t) => t.v));
    const k = first({ topK: 3 });
    expect([...k].every((t) => top3.has(t))).toBe(true);
    expect(k.size).toBe(3);
    // The nucleus of mass 0.05 at temperature 3: the smallest prefix of the sorted list reaching it.
    const scaled = next.map((t) => Math.exp(t.lp / 3));
    const total = scaled.reduce((a, b) => a + b, 0);
    let n = 0;
    for (let cum = 0; cum < 0.05 * total; n++) cum += scaled[n]!;
    const nucleus = new Set(next.slice(0, n).map((t) => t.v));
    const p = first({ topP: 0.05 });
    expect([...p].every((t) => nucleus.has(t))).toBe(true);
    expect(p.size).toBeGreaterThan(1);
    expect(first({}).size).toBeGreaterThan(n);
  });

  it("refuses bad parameters, bad token ids and prompts that fill the context", () => {
    expect(() => engine.sample(prompt, { maxTokens: 0 })).toThrow(InputError);
    expect(() => engine.sample(prompt, { maxTokens: 4, temperature: -1 })).toThrow(/temperature/);
    expect(() => engine.sample(prompt, { maxTokens: 4, topP: 0 })).toThrow(/topP/);
    expect(() => engine.sample(prompt, { maxTokens: 4, topK: -2 })).toThrow(/topK/);
    expect(() => engine.sample(prompt, { maxTokens: 4, stop: [""] })).toThrow(/stop strings/);
    expect(() => engine.sample(prompt, { maxTokens: 4, stop: [999] })).toThrow(/stop token id 999/);
    expect(() => engine.sample(prompt, { maxTokens: 4 }, 0)).toThrow(/numSamples/);
    expect(() => engine.sample([], { maxTokens: 4 })).toThrow(/empty/);
    expect(() => engine.sample([1, 300], { maxTokens: 4 })).toThrow(InputError);
    const C = engine.config.contextLength;
    const full = new Array<number>(C).fill(97);
    expect(() => engine.sample(full, { maxTokens: 1 })).toThrow(ContextLengthError);
    expect(() => engine.sample(full, { maxTokens: 1 })).toThrow(
      `the prompt has ${C} tokens but the model's context length is ${C}`,
    );
    expect(() => engine.computeLogprobs([...full, 97])).toThrow(ContextLengthError);
  });
});

describe("stopping", () => {
  let engine: LocalEngine;
  let prompt: number[];
  let free: number[];
  beforeAll(async () => {
    engine = await overfitEngine();
    prompt = engine.tokenizer.encode("the ", { addBos: true });
    free = engine.sample(prompt, { maxTokens: 40, temperature: 0 }).sequences[0]!.tokens;
  });

  it("continues the memorised text greedily (the fixture works)", () => {
    expect(engine.tokenizer.decode(free)).toBe(OVERFIT_TEXT.repeat(3).slice(4, 44));
  });

  it("stops on a stop string, keeping the tokens that complete it", () => {
    const s = engine.sample(prompt, { maxTokens: 40, temperature: 0, stop: ["on the"] }).sequences[0]!;
    expect(s.stopReason).toBe("stop");
    expect(engine.tokenizer.decode(s.tokens)).toBe("cat sat on the");
    expect(s.tokens).toEqual(free.slice(0, s.tokens.length));
    expect(s.logprobs).toHaveLength(s.tokens.length);
  });

  it("stops on a stop token id, keeping it", () => {
    const dot = engine.tokenizer.encode(".")[0]!;
    const s = engine.sample(prompt, { maxTokens: 40, temperature: 0, stop: ["never appears", dot] }).sequences[0]!;
    expect(s.stopReason).toBe("stop");
    expect(engine.tokenizer.decode(s.tokens)).toBe("cat sat on the mat.");
  });

  it("reports length when maxTokens runs out", () => {
    const s = engine.sample(prompt, { maxTokens: 5, temperature: 0 }).sequences[0]!;
    expect(s).toMatchObject({ stopReason: "length", tokens: free.slice(0, 5) });
  });

  it("truncates at the context length with stop reason length", () => {
    const C = engine.config.contextLength;
    const s = engine.sample(prompt, { maxTokens: 1000, temperature: 0 }).sequences[0]!;
    expect(s.stopReason).toBe("length");
    expect(prompt.length + s.tokens.length).toBe(C);
  });

  it("stops at EOS by default", async () => {
    // A model trained to answer with EOS right after the prompt.
    const eosEngine = await engineFor({ dModel: 16, nLayers: 1, nHeads: 1, contextLength: 16 }, 2);
    const eos = eosEngine.tokenizer.eosId;
    const p = eosEngine.tokenizer.encode("hi", { addBos: true });
    for (let i = 0; i < 30; i++) {
      eosEngine.forwardBackward(
        [datum(p, { target_tokens: [...p.slice(1), eos], weights: [0, 0, 1] })],
        "cross_entropy",
      );
      eosEngine.optimStep({
        learningRate: 3e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weightDecay: 0,
        gradClipNorm: 0,
      });
    }
    const s = eosEngine.sample(p, { maxTokens: 10, temperature: 0 }).sequences[0]!;
    expect(s).toMatchObject({ tokens: [eos], stopReason: "stop" });
  });
});
