/**
 * {@link TrajectoryPool}: collects trajectories by group and hands whole groups to the trainer
 * when a batch is ready, leaving out groups sampled by weights that are too old.
 * @module
 */
import { Trajectory, type TrajectoryInit } from "../contracts/trajectory.js";
import { Notifier } from "./notifier.js";
import type { RolloutTask, TaskGroup } from "../contracts/task.js";
import { appendAll, minOf } from "../wire/arrays.js";

/** When the pool hands out a batch (`trajectory_pool.check_batch_ready_function`). */
export type BatchReadiness =
  "loaded_batch_finished" | "batch_size_reached" | "batch_size_reached_and_loaded_batch_finished";

/** Options of {@link TrajectoryPool}. */
export interface TrajectoryPoolOptions {
  /**
   * `loaded_batch_finished` (and `batch_size_reached_and_loaded_batch_finished`, which behaves
   * alike because one training step is one loaded batch): ready when every group of the oldest
   * loaded batch has finished; hands out that batch. `batch_size_reached`: ready when finished
   * groups hold at least `batchSize` trajectories; hands out whole groups, oldest first, until
   * `batchSize` is reached.
   */
  readiness: BatchReadiness;
  /** Trajectories per batch for `batch_size_reached` (`trajectory_pool.batch_size`). */
  batchSize: number;
  /** Most policy versions a group's oldest trajectory may lag behind the trainer (`weight.staleness_threshold`). */
  stalenessThreshold: number;
  /** A finished group whose rollouts produced trajectories fewer than this many times is dropped (default 1). */
  minGroupSize?: number;
}

/** What {@link TrajectoryPool.take} returns. */
export interface PoolTake {
  /** The batch, sorted by batch, row, run and emission order; undefined when none is ready. */
  batch: Trajectory[] | undefined;
  /** Groups removed because their oldest trajectory was too stale. */
  stale: TaskGroup[];
  /** Trajectories in the stale groups. */
  staleTrajectories: number;
}

/** Where a saved group's tasks came from (its row data is read again from the data files). */
export interface PooledGroup {
  /** The group id. */
  groupId: string;
  /** Row index. */
  index: number;
  /** Epoch it was handed out in. */
  epoch: number;
  /** Loader batch it was handed out in. */
  batchIndex: number;
  /** Tasks in the group. */
  size: number;
}

/** A finished group kept in a checkpoint. */
export interface PooledGroupState {
  /** The group, without its row data. */
  group: PooledGroup;
  /** Its trajectories as plain objects. */
  trajectories: TrajectoryInit[];
}

/** The pool's contents in a checkpoint (taken when no rollout is running). */
export interface PoolState {
  /** Finished groups not yet trained on. */
  ready: PooledGroupState[];
}

interface Entry {
  group: TaskGroup;
  /** Trajectories per run id, in emission order; undefined until that run finished. */
  runs: Array<Trajectory[] | undefined>;
  /** Set once every run has finished and the group was kept. */
  ready: boolean;
  /** Trajectories over all runs (set when ready). */
  trajectories: number;
  /** Oldest policy version among its trajectories, Infinity when none says (set when ready). */
  oldest: number;
}

/**
 * Groups trajectories by their task group. A group is finished when every copy of its row has
 * reported (trajectories, or none for a skipped rollout); finished groups with fewer than
 * `minGroupSize` productive rollouts are dropped and counted. {@link TrajectoryPool.take} first
 * removes finished groups whose oldest trajectory was sampled more than `stalenessThreshold`
 * versions before the trainer's, then hands out a batch when the readiness rule says so.
 */
export class TrajectoryPool {
  /** Registered groups not yet handed out or dropped, in registration order. */
  private readonly entries = new Map<string, Entry>();
  /** The finished groups among them, in the order they finished. */
  private ready: Entry[] = [];
  /** Trajectories in `ready` (kept as a count: the scheduler asks after every finished group). */
  private readyCount = 0;
  /**
   * Oldest policy version among `ready` (Infinity when none says): `take` looks for stale groups
   * only when this one is stale, rather than going through every finished group each time the
   * scheduler asks (after every finished group, so a batch of n groups cost n² / 2 checks).
   */
  private readyOldest = Infinity;
  /** Loaded batches not yet handed out (batch-order readiness): a batch stays even when all of its groups were dropped. */
  private readonly batches = new Set<number>();
  private readonly notifier = new Notifier();
  /** Groups dropped for having too few productive rollouts, since the last {@link TrajectoryPool.takeDroppedGroups}. */
  private droppedGroups = 0;

  /** @param options readiness, batch size and staleness threshold. */
  constructor(private readonly options: TrajectoryPoolOptions) {}

  /** Registers a group whose tasks are about to run. */
  register(group: TaskGroup): void {
    this.entries.set(group.groupId, {
      group,
      runs: group.tasks.map(() => undefined),
      ready: false,
      trajectories: 0,
      oldest: Infinity,
    });
    if (this.options.readiness !== "batch_size_reached") this.batches.add(group.batchIndex);
    this.notifier.notify();
  }

  /**
   * Records that `task` finished with `trajectories` (empty when it produced none or was
   * skipped). Returns true when this finished its group (kept or dropped).
   */
  put(task: RolloutTask, trajectories: readonly Trajectory[]): boolean {
    const entry = this.entries.get(task.groupId);
    if (!entry || entry.runs[task.runId] !== undefined) return false;
    entry.runs[task.runId] = [...trajectories];
    const finished = !entry.runs.includes(undefined);
    if (finished) {
      const productive = entry.runs.filter((run) => run!.length > 0).length;
      if (productive < (this.options.minGroupSize ?? 1)) {
        this.entries.delete(task.groupId);
        this.droppedGroups++;
      } else {
        this.markReady(entry);
      }
    }
    this.notifier.notify();
    return finished;
  }

  /** Resolves at the next change (a registration or a finished task), or when `signal` aborts. */
  changed(signal?: AbortSignal): Promise<void> {
    return this.notifier.changed(signal);
  }

  /** Groups registered and not yet finished. */
  get unfinishedGroups(): number {
    return this.entries.size - this.ready.length;
  }

  /** Trajectories in finished groups not yet handed out. */
  get readyTrajectories(): number {
    return this.readyCount;
  }

  /** Groups dropped for too few productive rollouts since the last call, reset. */
  takeDroppedGroups(): number {
    const n = this.droppedGroups;
    this.droppedGroups = 0;
    return n;
  }

  /**
   * Removes stale finished groups, then hands out a batch if one is ready.
   * @param trainerVersion the policy version the trainer holds (the number of steps taken).
   */
  take(trainerVersion: number): PoolTake {
    const { stalenessThreshold } = this.options;
    const stale =
      trainerVersion - this.readyOldest > stalenessThreshold
        ? this.ready.filter((entry) => trainerVersion - entry.oldest > stalenessThreshold)
        : [];
    this.remove(stale);
    const result = {
      stale: stale.map((entry) => entry.group),
      staleTrajectories: stale.reduce((n, entry) => n + entry.trajectories, 0),
    };
    const taken = this.readyBatch();
    if (taken === undefined) return { batch: undefined, ...result };
    this.remove(taken);
    taken.sort(
      (a, b) =>
        a.group.batchIndex - b.group.batchIndex || a.group.epoch - b.group.epoch || a.group.index - b.group.index,
    );
    const batch: Trajectory[] = [];
    for (const entry of taken) for (const run of entry.runs) appendAll(batch, run!);
    return { batch, ...result };
  }

  /** The pool's finished groups, for a checkpoint taken while no rollout runs. */
  snapshot(): PoolState {
    const ready = this.ready.map(({ group, runs }) => ({
      group: {
        groupId: group.groupId,
        index: group.index,
        epoch: group.epoch,
        batchIndex: group.batchIndex,
        size: group.tasks.length,
      },
      trajectories: runs.flatMap((run) => run!.map((t) => ({ ...t }))),
    }));
    return { ready };
  }

  /** Puts back finished groups from a checkpoint; `groupOf` rebuilds each group's tasks. */
  restore(state: PoolState, groupOf: (saved: PooledGroup) => TaskGroup): void {
    for (const saved of state.ready) {
      const group = groupOf(saved.group);
      const runs: Trajectory[][] = group.tasks.map(() => []);
      for (const init of saved.trajectories) runs[init.runId ?? 0]?.push(new Trajectory(init));
      const entry: Entry = { group, runs, ready: false, trajectories: 0, oldest: Infinity };
      this.entries.set(group.groupId, entry);
      this.markReady(entry);
      if (this.options.readiness !== "batch_size_reached") this.batches.add(group.batchIndex);
    }
    this.notifier.notify();
  }

  private markReady(entry: Entry): void {
    entry.ready = true;
    for (const run of entry.runs) {
      entry.trajectories += run!.length;
      for (const t of run!) if (t.policyVersion !== undefined) entry.oldest = Math.min(entry.oldest, t.policyVersion);
    }
    this.ready.push(entry);
    this.readyCount += entry.trajectories;
    this.readyOldest = Math.min(this.readyOldest, entry.oldest);
  }

  /** The groups of the batch that is ready now, if one is. */
  private readyBatch(): Entry[] | undefined {
    const { readiness, batchSize } = this.options;
    if (readiness === "batch_size_reached") {
      if (this.readyTrajectories < batchSize) return undefined;
      // Whole groups, in the order they finished, until the batch size is reached.
      const taken: Entry[] = [];
      let n = 0;
      for (const entry of this.ready) {
        if (n >= batchSize) break;
        taken.push(entry);
        n += entry.trajectories;
      }
      return taken;
    }
    // The oldest loaded batch, once all of its groups still here have finished (it may be empty
    // when every group was dropped: the trainer then skips the step).
    if (this.batches.size === 0) return undefined;
    const oldest = minOf(this.batches);
    const groups = [...this.entries.values()].filter((entry) => entry.group.batchIndex === oldest);
    if (!groups.every((entry) => entry.ready)) return undefined;
    this.batches.delete(oldest);
    return groups;
  }

  /** Forgets `entries`. */
  private remove(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    for (const entry of entries) this.entries.delete(entry.group.groupId);
    const gone = new Set(entries);
    this.ready = this.ready.filter((entry) => !gone.has(entry));
    this.readyCount = this.ready.reduce((n, entry) => n + entry.trajectories, 0);
    this.readyOldest = this.ready.reduce((oldest, entry) => Math.min(oldest, entry.oldest), Infinity);
  }
}
