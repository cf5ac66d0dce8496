/**
 * The worker threads behind the engines: failures inside a worker reach the caller, the last
 * engine to close terminates the workers, and a process that never closes its engine still
 * exits (workers run from the compiled package there, as the CLI runs them).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../../src/engine/config.js";
import { LocalEngine } from "../../src/engine/index.js";
import { EngineRuntime } from "../../src/engine/runtime.js";
import type { SampleJob } from "../../src/engine/sample-lanes.js";
import { threadPool } from "../../src/engine/thread-pool.js";
import { lmDatum } from "./helpers.js";
import { EngineError } from "../../src/errors.js";

const run = promisify(execFile);
const config = resolveModelConfig({ dModel: 16, nLayers: 1, nHeads: 2, contextLength: 16 }, 259);

describe("the engine thread pool", () => {
  it("re-throws a worker's failure on the calling thread and stays usable", async () => {
    const runtime = new EngineRuntime(config, { threads: 2 }, 0);
    const broken = { kind: "sample", job: { numSamples: 1 } as SampleJob } as const;
    let error: unknown;
    try {
      runtime.run([null, broken]);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).message).toMatch(/^engine worker thread: /);
    expect((error as EngineError).workerStack).toMatch(/sample-lanes/);
    const engine = LocalEngine.create({ model: config, outputDir: "unused", threads: 2 });
    expect(engine.sample([256, 1], { maxTokens: 3, seed: 1 }, 4).sequences).toHaveLength(4);
    await runtime.close();
    await engine.close();
  });

  it("terminates the workers when the last engine using them closes", async () => {
    const a = LocalEngine.create({ model: config, outputDir: "unused", threads: 3 });
    const b = LocalEngine.create({ model: config, outputDir: "unused", threads: 2 });
    const data = Array.from({ length: 6 }, (_, i) => lmDatum([256, i + 1, i + 2, i + 3]));
    a.forwardBackward(data, "cross_entropy");
    b.forwardBackward(data, "cross_entropy");
    expect(threadPool.size).toBe(2);
    await a.close();
    expect(threadPool.size).toBe(2);
    await b.close();
    expect(threadPool.size).toBe(0);
  });

  it("lets a process that never closes its engine exit, running workers from dist/", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "nexrl-threads-"));
    try {
      const dist = path.resolve("dist/engine/index.js");
      const code = `import { LocalEngine } from ${JSON.stringify(dist)};
const engine = LocalEngine.create({ model: "tiny", outputDir: ${JSON.stringify(dir)}, threads: 2 });
const { sequences } = engine.sample([256, 104, 105], { maxTokens: 5, seed: 3 }, 6);
console.log(JSON.stringify({ threads: engine.threads, kernels: engine.kernels, samples: sequences.length }));`;
      const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code]);
      expect(JSON.parse(stdout)).toEqual({ threads: 2, kernels: "wasm", samples: 6 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
