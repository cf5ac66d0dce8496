/** Shared fixtures of the engine tests: temporary output folders and small training sets. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach } from "vitest";
import type { Rng } from "../../src/engine/prng.js";
import {
  LocalEngine,
  type LocalEngineOptions,
  type ModelConfig,
  type ModelPresetName,
} from "../../src/engine/index.js";
import { adamParams, datum, type Datum } from "../../src/wire/wire.js";

const dirs: string[] = [];
const engines: LocalEngine[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});
// After all tests of a file: some share an engine made in beforeAll.
afterAll(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

/** A fresh temporary folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-engine-"));
  dirs.push(dir);
  return dir;
}

/** An engine writing into a fresh temporary folder (default threads and kernels, no LoRA), closed after the file's tests. */
export async function engineFor(
  model: ModelPresetName | ModelConfig,
  seed = 0,
  compute: Omit<LocalEngineOptions, "model" | "seed" | "outputDir"> = {},
): Promise<LocalEngine> {
  const engine = LocalEngine.create({ model, seed, outputDir: await tempDir(), ...compute });
  engines.push(engine);
  return engine;
}

/** A cross_entropy datum training on every next token of `tokens`. */
export function lmDatum(tokens: number[]): Datum {
  return datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: tokens.slice(1).map(() => 1) });
}

/** Word → pig latin pairs. */
export const PIG_LATIN: Array<[string, string]> = [
  ["hello", "ellohay"],
  ["world", "orldway"],
  ["pig", "igpay"],
  ["latin", "atinlay"],
  ["banana", "ananabay"],
  ["smile", "ilesmay"],
  ["string", "ingstray"],
  ["apple", "appleway"],
];

/** SFT datums: chat prompt with weight 0, the pig-latin reply and EOS with weight 1. */
export function pigLatinDatums(engine: LocalEngine): Datum[] {
  const tok = engine.tokenizer;
  return PIG_LATIN.map(([word, answer]) => {
    const prompt = tok.applyChatTemplate([{ role: "user", content: word }], { addGenerationPrompt: true });
    const reply = [...tok.encode(answer), tok.eosId];
    const tokens = [...prompt, ...reply];
    return datum(tokens.slice(0, -1), {
      target_tokens: tokens.slice(1),
      weights: tokens.slice(1).map((_, t) => (t + 1 >= prompt.length ? 1 : 0)),
    });
  });
}

/** The repeated text {@link overfitEngine} learns. */
export const OVERFIT_TEXT = "the cat sat on the mat. ";

/** A tiny engine that has memorised {@link OVERFIT_TEXT}, so greedy sampling continues it. */
export async function overfitEngine(): Promise<LocalEngine> {
  const engine = await engineFor({ dModel: 32, nLayers: 1, nHeads: 2, contextLength: 64 }, 1);
  const tokens = engine.tokenizer.encode(OVERFIT_TEXT.repeat(3).slice(0, 63), { addBos: true });
  const adam = adamParams({ learningRate: 1e-2 });
  for (let i = 0; i < 80; i++) {
    engine.forwardBackward([lmDatum(tokens)], "cross_entropy");
    engine.optimStep(adam);
  }
  return engine;
}

/**
 * A central-difference check of the gradient `g` of the parameters `w` along a random unit
 * direction `u` (drawn from `rng`): `analytic` is g·u, `numeric` (L(w + eps·u) − L(w − eps·u)) / 2eps
 * from `lossAt`, which reads `w` (restored afterwards).
 */
export function directionalDerivatives(
  w: Float32Array,
  g: ArrayLike<number>,
  rng: Rng,
  eps: number,
  lossAt: () => number,
): { analytic: number; numeric: number } {
  const u = Float64Array.from({ length: w.length }, () => rng.normal());
  const norm = Math.hypot(...u);
  u.forEach((x, i) => (u[i] = x / norm));
  let analytic = 0;
  for (let i = 0; i < w.length; i++) analytic += g[i]! * u[i]!;
  const saved = w.slice();
  w.forEach((x, i) => (w[i] = x + eps * u[i]!));
  const plus = lossAt();
  w.forEach((_, i) => (w[i] = saved[i]! - eps * u[i]!));
  const minus = lossAt();
  w.set(saved);
  return { analytic, numeric: (plus - minus) / (2 * eps) };
}
