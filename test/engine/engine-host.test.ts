/**
 * The engine host: an engine (or a snapshot's sampler) in a worker thread of its own answers as
 * the same engine on the calling thread does, bit for bit; its errors arrive as the same classes
 * with the same messages and fields; closing it ends its threads.
 */
import { readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { HostedEngine } from "../../src/engine/engine-host.js";
import { LocalEngine } from "../../src/engine/index.js";
import { adamParams } from "../../src/wire/wire.js";
import { lmDatum, tempDir } from "./helpers.js";
import { ConfigError, ContextLengthError, EngineError, InputError } from "../../src/errors.js";

/** Ids of this process's threads (Linux). */
const threadIds = (): Set<string> => new Set(readdirSync("/proc/self/task"));

/** What `run` threw. */
async function failure(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    return error as Error;
  }
  throw new Error("it did not throw");
}

const data = Array.from({ length: 5 }, (_, i) => lmDatum([256, 10 + i, 20 + i, 30 + i, 40 + i, 257]));
const adam = adamParams({ learningRate: 1e-2 });

describe("HostedEngine", () => {
  it("trains, samples, scores, saves and loads as the engine on this thread does, bit for bit", async () => {
    const options = { model: "tiny", seed: 3, threads: 2 } as const;
    const hosted = HostedEngine.create({ ...options, outputDir: await tempDir() });
    const local = LocalEngine.create({ ...options, outputDir: await tempDir() });
    try {
      expect(hosted.config).toEqual(local.config);
      expect(hosted.threads).toBe(2);
      for (let step = 0; step < 2; step++) {
        expect(await hosted.forwardBackward(data, "cross_entropy")).toEqual(
          local.forwardBackward(data, "cross_entropy"),
        );
        expect(await hosted.optimStep(adam)).toEqual(local.optimStep(adam));
      }
      expect(await hosted.forward(data, "cross_entropy")).toEqual(local.forward(data, "cross_entropy"));
      const params = { maxTokens: 12, seed: 9, temperature: 1 };
      expect(await hosted.sampleAsync([256, 1, 2], params, 5)).toEqual(await local.sampleAsync([256, 1, 2], params, 5));
      expect(await hosted.computeLogprobs([256, 5, 6, 7])).toEqual(local.computeLogprobs([256, 5, 6, 7]));

      const checkpoint = await hosted.saveState("step_2", { optimizer: true });
      expect(await readFile(checkpoint)).toEqual(await readFile(await local.saveState("step_2", { optimizer: true })));
      const snapshot = await hosted.saveWeightsForSampler("step_2");
      const sampler = await HostedEngine.samplerFromSnapshot(snapshot, { threads: 2 });
      expect(sampler.config).toEqual(local.config);
      expect(await sampler.sampleAsync([256, 1, 2], params, 5)).toEqual(
        await local.sampleAsync([256, 1, 2], params, 5),
      );
      await sampler.close();

      // Train on, then load the checkpoint back: the next step is the one the engine here takes.
      await hosted.forwardBackward(data, "cross_entropy");
      await hosted.optimStep(adam);
      await hosted.loadState(checkpoint, { optimizer: true });
      expect(await hosted.forwardBackward(data, "cross_entropy")).toEqual(local.forwardBackward(data, "cross_entropy"));
    } finally {
      await hosted.close();
      await local.close();
    }
  });

  it("throws the engine's errors as the same classes, messages and fields", async () => {
    const hosted = HostedEngine.create({ model: "tiny", threads: 1, outputDir: await tempDir() });
    const local = LocalEngine.create({ model: "tiny", threads: 1, outputDir: await tempDir() });
    try {
      const outside = await failure(() => hosted.sampleAsync([256, 999], { maxTokens: 3 }));
      expect(outside).toBeInstanceOf(InputError);
      expect(outside).toEqual(await failure(() => local.sampleAsync([256, 999], { maxTokens: 3 })));
      const long = Array.from({ length: 200 }, () => 1);
      const tooLong = await failure(() => hosted.computeLogprobs(long));
      expect(tooLong).toBeInstanceOf(ContextLengthError);
      expect(tooLong).toMatchObject({ what: "the sequence", length: 200, contextLength: 128 });
      expect(tooLong.message).toBe((await failure(async () => local.computeLogprobs(long))).message);
      const missing = await failure(() => hosted.loadState("/nonexistent/state.nxs", { optimizer: true }));
      expect(missing).toBeInstanceOf(EngineError);
      expect(missing).toMatchObject({
        problem: "state_file",
        stateFileProblem: "not_found",
        path: "/nonexistent/state.nxs",
      });
      expect(missing.message).toBe(
        (await failure(() => local.loadState("/nonexistent/state.nxs", { optimizer: true }))).message,
      );
      // The engine is still usable after a failed call.
      expect((await hosted.forward(data, "cross_entropy")).lossFnOutputs).toHaveLength(5);

      const snapshotError = await failure(() => HostedEngine.samplerFromSnapshot("/nonexistent/weights.nxw"));
      expect(snapshotError).toBeInstanceOf(EngineError);
      expect(snapshotError.message).toBe(
        (await failure(() => LocalEngine.samplerFromSnapshot("/nonexistent/weights.nxw"))).message,
      );
      expect(() => HostedEngine.create({ model: "huge" as "tiny", outputDir: "unused" })).toThrow(ConfigError);
      expect(() => HostedEngine.create({ model: "tiny", threads: 0, outputDir: "unused" })).toThrow(ConfigError);
    } finally {
      await hosted.close();
      await local.close();
    }
  });

  it("ends its threads on close, and refuses calls afterwards", async () => {
    await readFile(import.meta.filename); // libuv's file threads start on first use, and stay
    const outputDir = await tempDir();
    const before = threadIds();
    const hosted = HostedEngine.create({ model: "tiny", threads: 2, outputDir });
    const pending = hosted.forwardBackward(data, "cross_entropy");
    // The host thread and its compute helper, by id: a thread the test runner starts meanwhile is not the engine's.
    await expect
      .poll(() => [...threadIds()].filter((id) => !before.has(id)).length, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    const started = [...threadIds()].filter((id) => !before.has(id));
    // Close waits for the calls already made.
    await hosted.close();
    expect((await pending).lossFnOutputs).toHaveLength(5);
    // An ended thread can take a moment to leave /proc under load.
    await expect.poll(() => started.filter((id) => threadIds().has(id)), { timeout: 10_000 }).toEqual([]);
    const closed = await failure(() => hosted.forward(data, "cross_entropy"));
    expect(closed).toBeInstanceOf(EngineError);
    expect(closed).toMatchObject({
      problem: "closed",
      message: "this engine (or sampler) was closed; create a new one to compute again",
    });
    await hosted.close();
  });
});
