import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEngine, type LocalEngine as Engine } from "../../src/engine/index.js";
import { adamParams } from "../../src/wire/wire.js";
import { crc32 } from "../../src/engine/crc32.js";
import { engineFor, lmDatum, tempDir } from "./helpers.js";
import { EngineError, InputError, type StateFileProblem } from "../../src/errors.js";

const SHAPE = { dModel: 16, nLayers: 2, nHeads: 2, contextLength: 32 };
const adam = adamParams({ learningRate: 1e-2, weightDecay: 0.01, gradClipNorm: 1 });

function train(engine: Engine, steps: number): void {
  const tokens = engine.tokenizer.encode("checkpoints must restore exactly", { addBos: true });
  for (let i = 0; i < steps; i++) {
    engine.forwardBackward([lmDatum(tokens.slice(0, 20)), lmDatum(tokens.slice(10))], "cross_entropy");
    engine.optimStep(adam);
  }
}

/** Expects `path` to be refused by loadState with `problem`. */
async function expectRefused(path: string, problem: StateFileProblem, message: RegExp): Promise<void> {
  const engine = await engineFor(SHAPE);
  const err = await engine.loadState(path, { optimizer: true }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(EngineError);
  expect((err as EngineError).problem).toBe("state_file");
  expect((err as EngineError).stateFileProblem).toBe(problem);
  expect((err as EngineError).message).toMatch(message);
}

describe("saveState / loadState", () => {
  it.each([1, 2, 3])(
    "save → train 2 steps equals load → train 2 steps, bit for bit, with %i threads",
    async (threads) => {
      const a = await engineFor(SHAPE, 1, { threads });
      train(a, 3);
      const path = await a.saveState("ckpt-3", { optimizer: true });
      expect(path).toBe(join(a.outputDir, "checkpoints", "ckpt-3.nxs"));
      train(a, 2);
      const b = await engineFor(SHAPE, 99, { threads });
      train(b, 1); // state and pending gradients that loading must replace
      b.forwardBackward([lmDatum([256, 1, 2, 3])], "cross_entropy");
      await b.loadState(path, { optimizer: true });
      expect(b.step).toBe(3);
      train(b, 2);
      expect(b.step).toBe(5);
      const wa = a.getWeights();
      const wb = b.getWeights();
      expect(Buffer.from(wb.buffer).equals(Buffer.from(wa.buffer))).toBe(true);
    },
  );

  it("without the optimizer, restores weights only and starts a fresh optimizer", async () => {
    const a = await engineFor(SHAPE, 1);
    train(a, 2);
    const weightsOnly = await a.saveState("weights", { optimizer: false });
    const full = await a.saveState("full", { optimizer: true });
    expect((await stat(weightsOnly)).size).toBeLessThan((await stat(full)).size / 2);
    const b = await engineFor(SHAPE, 2);
    await b.loadState(full, { optimizer: false });
    expect(b.getWeights()).toEqual(a.getWeights());
    expect(b.step).toBe(0);
    await expectRefused(weightsOnly, "missing_optimizer", /weights only.*optimizer: false/);
  });

  it("overwrites a checkpoint of the same name atomically", async () => {
    const a = await engineFor(SHAPE, 1);
    const first = await a.saveState("latest", { optimizer: true });
    train(a, 1);
    expect(await a.saveState("latest", { optimizer: true })).toBe(first);
    const b = await engineFor(SHAPE, 2);
    await b.loadState(first, { optimizer: true });
    expect(b.step).toBe(1);
  });

  it("refuses corrupt, truncated, foreign, missing and mismatched files", async () => {
    const a = await engineFor(SHAPE, 1);
    train(a, 1);
    const path = await a.saveState("good", { optimizer: true });
    const bytes = await readFile(path);
    const dir = await tempDir();
    const variant = async (name: string, data: Uint8Array): Promise<string> => {
      const p = join(dir, name);
      await writeFile(p, data);
      return p;
    };
    const flipped = Uint8Array.from(bytes);
    flipped[bytes.length - 100]! ^= 0x01;
    await expectRefused(await variant("flipped.nxs", flipped), "corrupt", /checksum does not match/);
    await expectRefused(await variant("cut.nxs", bytes.subarray(0, bytes.length - 7)), "truncated", /cut short/);
    await expectRefused(await variant("cut-header.nxs", bytes.subarray(0, 30)), "truncated", /cut short/);
    await expectRefused(await variant("empty.nxs", new Uint8Array(0)), "truncated", /cut short/);
    await expectRefused(
      await variant("foreign.nxs", Buffer.from("PK\u0003\u0004 definitely a zip file")),
      "not_a_state_file",
      /not a nexrl engine state/,
    );
    const future = Uint8Array.from(bytes);
    future[8] = 2;
    await expectRefused(await variant("future.nxs", future), "unsupported_version", /format version 2/);
    await expectRefused(join(dir, "absent.nxs"), "not_found", /no such file/);
    // Damage the checksum cannot see, because the file's own checksum was made over it.
    const resealed = (data: Uint8Array): Uint8Array => {
      const out = Uint8Array.from(data);
      new DataView(out.buffer).setUint32(16, crc32(out.subarray(20)), true);
      return out;
    };
    const headerLength = new DataView(bytes.buffer, bytes.byteOffset).getUint32(12, true);
    const badHeader = Uint8Array.from(bytes);
    badHeader.set(new TextEncoder().encode(`{"x":1}`.padEnd(headerLength, " ")), 20);
    await expectRefused(
      await variant("bad-header.nxs", resealed(badHeader)),
      "corrupt",
      /its header is not valid JSON of the expected shape/,
    );
    const longer = new Uint8Array(bytes.length + 4);
    longer.set(bytes);
    await expectRefused(
      await variant("longer.nxs", resealed(longer)),
      "corrupt",
      new RegExp(`it has ${bytes.length + 4} bytes but its header announces ${bytes.length}`),
    );
    expect(() => LocalEngine.create({ model: "tiny", seed: Number.NaN, outputDir: dir })).toThrow(
      "seed must be a finite number, got NaN",
    );
    expect(() => LocalEngine.create({ model: "tiny", outputDir: "" })).toThrow("outputDir must be a non-empty path");
    const other = await engineFor({ ...SHAPE, dModel: 32 });
    await expectRefused(
      await other.saveState("other", { optimizer: true }),
      "config_mismatch",
      /dModel 32 \(engine: 16\)/,
    );
  });

  it("validates checkpoint names", async () => {
    const a = await engineFor(SHAPE);
    for (const name of ["../escape", "a/b", "", ".hidden", "-dash", "x".repeat(201), "a\\b"]) {
      await expect(a.saveState(name, { optimizer: false })).rejects.toThrow(InputError);
      await expect(a.saveWeightsForSampler(name)).rejects.toThrow(InputError);
    }
    await expect(a.saveState("step_000001.v2-final", { optimizer: false })).resolves.toMatch(
      /step_000001\.v2-final\.nxs$/,
    );
  });
});

describe("sampler snapshots", () => {
  it("serve the saved weights while training continues, and are immutable", async () => {
    const engine = await engineFor(SHAPE, 1);
    train(engine, 2);
    const path = await engine.saveWeightsForSampler("step_000002");
    expect(path).toBe(join(engine.outputDir, "sampler_weights", "step_000002.nxw"));
    const sampler = await LocalEngine.samplerFromSnapshot(path);
    expect(sampler.config).toEqual(engine.config);
    const tokens = engine.tokenizer.encode("snapshot", { addBos: true });
    const before = engine.computeLogprobs(tokens);
    expect(sampler.computeLogprobs(tokens)).toEqual(before);
    const opts = { maxTokens: 10, seed: 5 };
    const sampled = engine.sample(tokens, opts);
    train(engine, 2);
    expect(engine.computeLogprobs(tokens)).not.toEqual(before);
    expect(sampler.computeLogprobs(tokens)).toEqual(before);
    expect(sampler.sample(tokens, opts)).toEqual(sampled);
    await expect(engine.saveWeightsForSampler("step_000002")).rejects.toThrow(EngineError);
    expect((await LocalEngine.samplerFromSnapshot(path)).computeLogprobs(tokens)).toEqual(before);
  });

  it("load as weights into an engine, but not with an optimizer", async () => {
    const a = await engineFor(SHAPE, 1);
    train(a, 1);
    const path = await a.saveWeightsForSampler("w");
    const b = await engineFor(SHAPE, 2);
    await b.loadState(path, { optimizer: false });
    expect(b.getWeights()).toEqual(a.getWeights());
    await expect(b.loadState(path, { optimizer: true })).rejects.toThrow(/weights only/);
  });

  it("refuse a damaged snapshot", async () => {
    const a = await engineFor(SHAPE, 1);
    const path = await a.saveWeightsForSampler("s");
    const bytes = await readFile(path);
    bytes[40]! ^= 0xff;
    await writeFile(path, bytes);
    await expect(LocalEngine.samplerFromSnapshot(path)).rejects.toThrow(EngineError);
  });
});
