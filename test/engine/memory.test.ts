/**
 * `LocalEngine.memoryBytes`: the storage an engine or a snapshot sampler allocates, known before
 * it is built (what `nexrl serve`'s memory budget counts).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parameterCount } from "../../src/engine/params.js";
import { LocalEngine, MODEL_PRESETS, resolveModelConfig } from "../../src/engine/index.js";
import { ConfigError } from "../../src/errors.js";

const dir = await mkdtemp(join(tmpdir(), "nexrl-engine-memory-"));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("LocalEngine.memoryBytes", () => {
  it("is the storage an engine allocates", async () => {
    // The TypeScript kernels' storage is a SharedArrayBuffer, which Node counts in arrayBuffers.
    const before = process.memoryUsage().arrayBuffers;
    const engine = LocalEngine.create({ model: "small", threads: 2, kernels: "js", outputDir: dir });
    const grown = process.memoryUsage().arrayBuffers - before;
    await engine.close();
    const expected = LocalEngine.memoryBytes("small", { threads: 2 });
    expect(Math.abs(grown - expected) / expected).toBeLessThan(0.01);
  });

  it("covers weights, gradients and both Adam moments, and more for more threads; a sampler only the weights and caches", () => {
    for (const name of Object.keys(MODEL_PRESETS) as Array<keyof typeof MODEL_PRESETS>) {
      const params = parameterCount(resolveModelConfig(name, 259));
      const one = LocalEngine.memoryBytes(name, { threads: 1 });
      const sampler = LocalEngine.memoryBytes(name, { threads: 1, sampler: true });
      expect(one).toBeGreaterThan(4 * 4 * params);
      expect(LocalEngine.memoryBytes(name, { threads: 2 })).toBeGreaterThan(one);
      expect(sampler).toBeGreaterThan(4 * params);
      expect(sampler).toBeLessThan(one);
    }
    expect(LocalEngine.memoryBytes("medium", { threads: 2 })).toBeGreaterThan(
      LocalEngine.memoryBytes("small", { threads: 2 }),
    );
  });

  it("refuses what create refuses", () => {
    expect(() => LocalEngine.memoryBytes("huge" as "tiny")).toThrow(ConfigError);
    expect(() => LocalEngine.memoryBytes("tiny", { threads: 0 })).toThrow(/threads must be an integer from 1 to 256/);
  });
});
