import { describe, expect, it } from "vitest";
import { DataLoader } from "../../src/data/data-loader.js";
import { TrajectoryPool } from "../../src/rollouts/pool.js";
import type { TaskGroup } from "../../src/contracts/task.js";
import { Trajectory } from "../../src/contracts/trajectory.js";

const loader = (rows: number, repeat: number, batchSize = 2) =>
  new DataLoader(
    Array.from({ length: rows }, (_, i) => ({ prompt: `p${i}` })),
    { promptKey: "prompt", batchSize, seed: 0, rolloutRepeatN: repeat },
  );

/** Finishes every task of `group` with one trajectory of reward `reward(runId)` sampled by `version`. */
function finish(
  pool: TrajectoryPool,
  group: TaskGroup,
  reward: (runId: number) => number = () => 1,
  version = 0,
): void {
  for (const task of group.tasks)
    pool.put(task, [
      new Trajectory({
        tokens: [1, 2],
        lossMask: [0, 1],
        reward: reward(task.runId),
        groupId: task.groupId,
        runId: task.runId,
        policyVersion: version,
      }),
    ]);
}

describe("TrajectoryPool", () => {
  it("hands out the loaded batch once every group of it has finished, in row and run order", () => {
    const data = loader(4, 2);
    const pool = new TrajectoryPool({ readiness: "loaded_batch_finished", batchSize: 99, stalenessThreshold: 0 });
    const [g0, g1] = data.nextBatch()!;
    const [g2] = data.nextBatch()!;
    [g0!, g1!, g2!].forEach((g) => pool.register(g));
    finish(pool, g1!);
    expect(pool.take(0).batch).toBeUndefined();
    pool.put(g0!.tasks[1]!, [new Trajectory({ tokens: [5, 6], lossMask: [0, 1], reward: 0, policyVersion: 0 })]);
    expect(pool.take(0).batch).toBeUndefined();
    pool.put(g0!.tasks[0]!, [new Trajectory({ tokens: [3, 4], lossMask: [0, 1], reward: 0, policyVersion: 0 })]);
    expect([pool.unfinishedGroups, pool.readyTrajectories]).toEqual([1, 4]);
    const batch = pool.take(0).batch!;
    expect(batch.map((t) => [t.tokens[0], t.groupId, t.runId])).toEqual([
      [3, undefined, undefined],
      [5, undefined, undefined],
      [1, "0-1", 0],
      [1, "0-1", 1],
    ]);
    finish(pool, g2!);
    expect(pool.take(0).batch).toHaveLength(2);
    expect(pool.take(0).batch).toBeUndefined();
  });

  it("with batch_size_reached hands out whole finished groups, oldest first, until the batch size is reached", () => {
    const data = loader(6, 3, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 4, stalenessThreshold: 9 });
    const groups = [1, 2, 3].map(() => data.nextGroup()!);
    groups.forEach((g) => pool.register(g));
    finish(pool, groups[2]!);
    expect(pool.take(0).batch).toBeUndefined();
    finish(pool, groups[0]!);
    const batch = pool.take(0).batch!;
    expect(batch).toHaveLength(6);
    expect(new Set(batch.map((t) => t.groupId))).toEqual(new Set(["0-0", "0-2"]));
    expect(batch[0]!.groupId).toBe("0-0");
  });

  it("drops a finished group with fewer productive rollouts than the minimum, and an emptied batch is still handed out", () => {
    const data = loader(2, 3);
    const pool = new TrajectoryPool({
      readiness: "loaded_batch_finished",
      batchSize: 1,
      stalenessThreshold: 0,
      minGroupSize: 2,
    });
    const [g0, g1] = data.nextBatch()!;
    pool.register(g0!);
    pool.register(g1!);
    finish(pool, g0!);
    pool.put(g1!.tasks[0]!, [new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, policyVersion: 0 })]);
    pool.put(g1!.tasks[1]!, []);
    pool.put(g1!.tasks[2]!, []);
    expect(pool.takeDroppedGroups()).toBe(1);
    expect(pool.take(0).batch!.map((t) => t.groupId)).toEqual(["0-0", "0-0", "0-0"]);
    const [g2, g3] = data.nextBatch()!;
    for (const g of [g2!, g3!]) {
      pool.register(g);
      for (const t of g.tasks) pool.put(t, []);
    }
    expect(pool.take(0).batch).toEqual([]);
  });

  it("removes groups sampled more than staleness_threshold versions ago and reports them", () => {
    const data = loader(3, 2, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 2, stalenessThreshold: 1 });
    const [old, fresh, mixed] = [1, 2, 3].map(() => data.nextGroup()!);
    [old, fresh, mixed].forEach((g) => pool.register(g!));
    finish(pool, old!, () => 1, 0);
    finish(pool, fresh!, () => 1, 2);
    pool.put(mixed!.tasks[0]!, [new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, policyVersion: 1 })]);
    pool.put(mixed!.tasks[1]!, [new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, policyVersion: 3 })]);
    const take = pool.take(2);
    expect(take.stale.map((g) => g.groupId)).toEqual(["0-0"]);
    expect(take.staleTrajectories).toBe(2);
    expect(take.batch!.map((t) => t.policyVersion)).toEqual([2, 2]);
    // the group's oldest trajectory decides: version 1 is two versions behind 3
    const later = pool.take(3);
    expect([later.stale.map((g) => g.groupId), later.batch]).toEqual([["0-2"], undefined]);
  });

  it("keeps its counts and oldest version right through puts, takes and stale removals", () => {
    const data = loader(4, 2, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 4, stalenessThreshold: 1 });
    const groups = [1, 2, 3, 4].map(() => data.nextGroup()!);
    groups.forEach((g) => pool.register(g));
    // put reports whether the task finished its group
    expect(
      pool.put(groups[0]!.tasks[0]!, [
        new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, policyVersion: 0 }),
      ]),
    ).toBe(false);
    expect(pool.put(groups[0]!.tasks[1]!, [])).toBe(true);
    expect(pool.put(groups[0]!.tasks[1]!, [])).toBe(false);
    finish(pool, groups[1]!, () => 1, 3);
    expect([pool.readyTrajectories, pool.unfinishedGroups]).toEqual([3, 2]);
    // version 0 is stale at 2; the group of version 3 stays, and 3 trajectories are not a batch of 4
    const first = pool.take(2);
    expect([first.stale.map((g) => g.groupId), first.staleTrajectories, first.batch, pool.readyTrajectories]).toEqual([
      ["0-0"],
      1,
      undefined,
      2,
    ]);
    finish(pool, groups[2]!, () => 1, 3);
    finish(pool, groups[3]!, () => 1, 4);
    // with the stale group gone the oldest version is 3, not 0: nothing is stale at 4
    const second = pool.take(4);
    expect([second.stale, second.batch!.map((t) => t.groupId)]).toEqual([[], ["0-1", "0-1", "0-2", "0-2"]]);
    expect([pool.readyTrajectories, pool.unfinishedGroups]).toEqual([2, 0]);
  });

  it("never finds a group stale when none of its trajectories names the version that sampled it", () => {
    const data = loader(1, 2, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 2, stalenessThreshold: 0 });
    const group = data.nextGroup()!;
    pool.register(group);
    for (const task of group.tasks)
      pool.put(task, [new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, runId: task.runId })]);
    const take = pool.take(100);
    expect([take.stale, take.staleTrajectories, take.batch!.map((t) => t.runId)]).toEqual([[], 0, [0, 1]]);
  });

  it("wakes a waiter of changed() at the next registration or put, or when its signal aborts", async () => {
    const data = loader(1, 2, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 2, stalenessThreshold: 0 });
    const group = data.nextGroup()!;
    const registered = pool.changed();
    pool.register(group);
    await registered;
    const put = pool.changed();
    pool.put(group.tasks[0]!, []);
    await put;
    // Nothing changes now: only the signal ends the wait (a waiter left hanging fails the test by its timeout).
    const stop = new AbortController();
    const waiting = pool.changed(stop.signal);
    stop.abort(new Error("stopped"));
    await waiting;
    expect(pool.unfinishedGroups).toBe(1);
  });

  it("saves finished groups and restores them into a new pool", () => {
    const data = loader(2, 2, 1);
    const pool = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 4, stalenessThreshold: 5 });
    const group = data.nextGroup()!;
    pool.register(group);
    finish(pool, group, (run) => run * 10, 3);
    const state = JSON.parse(JSON.stringify(pool.snapshot()));
    const restored = new TrajectoryPool({ readiness: "batch_size_reached", batchSize: 2, stalenessThreshold: 5 });
    restored.restore(state, (saved) => data.groupOf(saved));
    const batch = restored.take(3).batch!;
    expect(batch.map((t) => [t.groupId, t.runId, t.reward, t.policyVersion, t instanceof Trajectory])).toEqual([
      ["0-0", 0, 0, 3, true],
      ["0-0", 1, 10, 3, true],
    ]);
  });
});
