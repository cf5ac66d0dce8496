import { describe, expect, it } from "vitest";
import { BaseRolloutWorker } from "../../src/contracts/rollout-worker.js";
import { DataLoader } from "../../src/data/data-loader.js";
import { RolloutRunner } from "../../src/rollouts/runner.js";
import { TrajectoryPool } from "../../src/rollouts/pool.js";
import { WeightSync } from "../../src/rollouts/weight-sync.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import { RolloutScheduler } from "../../src/rollouts/scheduler.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { SamplerInferenceClient } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { WorkerSettings } from "../../src/contracts/worker.js";
import { tempDir } from "../support/pipeline.js";

describe("WeightSync", () => {
  it("points new calls at the new sampler while a call in flight finishes on the old weights", async () => {
    const service = new LocalTrainingService({ outputDir: await tempDir(), seed: 0 });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const v0 = (await (await client.saveWeightsForSampler("initial")).result()).path;
    const inference = new SamplerInferenceClient({
      tokenizer: new ByteTokenizer(),
      samplingClient: await service.createSamplingClient(v0),
      policyVersion: 0,
    });
    const sync = new WeightSync(service, inference, { path: v0, version: 0 });
    const inFlight = inference.completion("abc", { maxTokens: 4, seed: 1 });
    const other = await service.createTrainingClient({ baseModel: "tiny", seed: 9 });
    const v1 = (await (await other.saveWeightsForSampler("step_000001")).result()).path;
    await sync.publish(v1, 1);
    expect(sync.sampler).toEqual({ path: v1, version: 1 });
    const [before, after] = [await inFlight, await inference.completion("abc", { maxTokens: 4, seed: 1 })];
    expect([before.policyVersion, after.policyVersion]).toEqual([0, 1]);
    const direct = await (
      await service.createSamplingClient(v0)
    ).computeLogprobs([...before.promptTokens, ...before.responseTokens]);
    expect(before.logprobs[0]).toBeCloseTo(direct[before.promptTokens.length]!, 4);
  });
});

/** A worker that samples nothing: its trajectories carry the version the runner reports. */
class Echo extends BaseRolloutWorker {
  constructor(
    options: ConstructorParameters<typeof BaseRolloutWorker>[0],
    private readonly gate?: (task: RolloutTask) => Promise<void> | undefined,
  ) {
    super(options);
  }

  rollout(task: RolloutTask) {
    const trajectory = { tokens: [1, 2, 3], lossMask: [0, 1, 1], reward: task.runId };
    const wait = this.gate?.(task);
    return wait ? wait.then(() => trajectory) : trajectory;
  }
}

function parts(options: {
  stream: boolean;
  lookahead: number;
  threshold: number;
  gate?: (task: RolloutTask) => Promise<void> | undefined;
}) {
  const version = { current: 0 };
  const loader = new DataLoader(
    Array.from({ length: 4 }, (_, i) => ({ prompt: `p${i}` })),
    { promptKey: "prompt", batchSize: 2, seed: 0, rolloutRepeatN: 2 },
  );
  const runner = new RolloutRunner({
    createWorker: (slot) =>
      new Echo({ name: `w-${slot}`, settings: {} as WorkerSettings, tokenizer: new ByteTokenizer() }, options.gate),
    numWorkers: 2,
    timeoutMs: 0,
    policy: { mode: "fail_fast" },
    sampling: { temperature: 1, maxTokens: 4 },
    currentVersion: () => version.current,
  });
  const pool = new TrajectoryPool({
    readiness: options.stream ? "batch_size_reached" : "loaded_batch_finished",
    batchSize: 4,
    stalenessThreshold: options.threshold,
  });
  const scheduler = new RolloutScheduler({
    loader,
    runner,
    pool,
    mode: options.stream ? "stream" : "batches",
    lookahead: options.lookahead,
    batchSize: 4,
  });
  return { version, loader, pool, scheduler };
}

describe("RolloutScheduler", () => {
  it("in sync mode rolls out batch k only once version k is released", async () => {
    const { loader, scheduler, version } = parts({ stream: false, lookahead: 0, threshold: 0 });
    scheduler.release(0);
    const first = await scheduler.next(0);
    expect(first!.trajectories.map((t) => [t.groupId, t.policyVersion])).toEqual([
      ["0-0", 0],
      ["0-0", 0],
      ["0-1", 0],
      ["0-1", 0],
    ]);
    expect(loader.batches).toBe(1);
    version.current = 1;
    scheduler.release(1);
    expect(loader.batches).toBe(2);
    expect((await scheduler.next(1))!.trajectories.every((t) => t.policyVersion === 1)).toBe(true);
  });

  it("in batch-async mode rolls out staleness_threshold batches ahead", async () => {
    const { loader, scheduler } = parts({ stream: false, lookahead: 1, threshold: 1 });
    scheduler.release(0);
    expect(loader.batches).toBe(2);
    const [a, b] = [await scheduler.next(0), await scheduler.next(1)];
    expect(a!.trajectories.map((t) => t.groupId)).toEqual(["0-0", "0-0", "0-1", "0-1"]);
    expect(b!.trajectories.map((t) => [t.groupId, t.policyVersion])).toEqual([
      ["0-2", 0],
      ["0-2", 0],
      ["0-3", 0],
      ["0-3", 0],
    ]);
  });

  it("in fully-async mode hands stale groups back to the loader and counts them", async () => {
    // Rows 2 and 3 finish only when the gate opens, so that they are still running (and the
    // scheduler cannot start more) when the first batch is handed out and the test drains.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { loader, scheduler, version } = parts({
      stream: true,
      lookahead: 1,
      threshold: 1,
      gate: (task) => (task.index >= 2 ? gate : undefined),
    });
    scheduler.release(0);
    const fresh = await scheduler.next(0);
    expect(fresh).toMatchObject({ staleDropped: 0, staleRequeued: 0 });
    expect(fresh!.trajectories).toHaveLength(4);
    const drained = scheduler.drain();
    open();
    await drained;
    // two more groups finished on version 0; the trainer is now at version 2: they are too old
    version.current = 2;
    scheduler.resume();
    const next = await scheduler.next(2);
    expect(next).toMatchObject({ staleDropped: 4, staleRequeued: 2 });
    expect(next!.trajectories.every((t) => t.policyVersion === 2)).toBe(true);
    expect(next!.trajectories.map((t) => t.groupId)).toEqual(["1-0", "1-0", "1-1", "1-1"]);
    // the requeued rows run again, on the current weights
    const requeued = await scheduler.next(2);
    expect(requeued!.trajectories.map((t) => [t.groupId, t.policyVersion])).toEqual([
      ["0-2", 2],
      ["0-2", 2],
      ["0-3", 2],
      ["0-3", 2],
    ]);
    expect(loader.cursor().requeued).toEqual([]);
    // Waiting for batches leaves nothing behind: a run of many steps must not pile up waiters.
    expect((scheduler as unknown as { wake: { waiters: unknown[] } }).wake.waiters).toHaveLength(0);
  });
});
