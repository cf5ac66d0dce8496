/**
 * {@link TrajectoryPool}: collects trajectories by group and hands whole groups to the trainer
 * when a batch is ready, leaving out groups sampled by weights that are too old.
 * @module
 */
import { Trajectory, type TrajectoryInit } from "../types/trajectory.js";
import { Notifier } from "./notifier.js";
import type { RolloutTask, TaskGroup } from "./task.js";
import { appendAll, minOf } from "../types/arrays.js";

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
  finished: number;
  /** Set once every run has finished and the group was kept. */
  ready: boolean;
  /** Trajectories over all runs. */
  trajectories: number;
  /** Oldest policy version among its trajectories (Infinity when none says): set when ready. */
  oldest: number;
}

/**
 * Groups trajectories by their task group. A group is finished when every copy of its row has
 * reported (trajectories, or none for a skipped rollout); finished groups with fewer than
 * `minGroupSize` productive rollouts are dropped and counted. {@link TrajectoryPool.take} first
 * removes finished groups whose oldest trajectory was sampled more than `stalenessThreshold`
 * versions before the trainer's, then hands out a batch when the readiness rule says so.
 *
 * Bookkeeping is incremental (each group's trajectory count and oldest version are kept when it
 * finishes): the trainer may ask after every finished group, and at a thousand groups in flight
 * a scan per question made the pool the pipeline's bottleneck.
 */
export class TrajectoryPool {
  private readonly entries = new Map<string, Entry>();
  private readyOrder: string[] = [];
  /** Trajectories in the groups of `readyOrder`. */
  private readyCount = 0;
  /** Oldest policy version over the groups of `readyOrder` (Infinity when none); undefined when it must be recomputed. */
  private readyOldest: number | undefined = Infinity;
  /** Loaded batches not yet handed out: batch index → its groups still in the pool (batch-order readiness only). */
  private readonly batches = new Map<number, string[]>();
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
      finished: 0,
      ready: false,
      trajectories: 0,
      oldest: Infinity,
    });
    this.trackBatch(group);
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
    entry.trajectories += trajectories.length;
    entry.finished++;
    const finished = entry.finished === entry.group.tasks.length;
    if (finished) {
      const productive = entry.runs.filter((run) => run!.length > 0).length;
      if (productive < (this.options.minGroupSize ?? 1)) {
        this.remove(task.groupId);
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
    return this.entries.size - this.readyOrder.length;
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
    const stale: TaskGroup[] = [];
    let staleTrajectories = 0;
    const threshold = this.options.stalenessThreshold;
    this.readyOldest ??= this.readyOrder.reduce(
      (oldest, id) => Math.min(oldest, this.entries.get(id)!.oldest),
      Infinity,
    );
    if (trainerVersion - this.readyOldest > threshold) {
      const staleIds = new Set<string>();
      for (const id of this.readyOrder) {
        const entry = this.entries.get(id)!;
        if (trainerVersion - entry.oldest <= threshold) continue;
        stale.push(entry.group);
        staleTrajectories += entry.trajectories;
        staleIds.add(id);
      }
      this.removeAll(staleIds);
    }
    const ids = this.readyIds();
    if (ids === undefined) return { batch: undefined, stale, staleTrajectories };
    const entries = ids.map((id) => this.entries.get(id)!);
    this.removeAll(new Set(ids));
    entries.sort(
      (a, b) =>
        a.group.batchIndex - b.group.batchIndex || a.group.epoch - b.group.epoch || a.group.index - b.group.index,
    );
    const batch: Trajectory[] = [];
    for (const entry of entries) for (const run of entry.runs) appendAll(batch, run!);
    return { batch, stale, staleTrajectories };
  }

  /** The pool's finished groups, for a checkpoint taken while no rollout runs. */
  snapshot(): PoolState {
    const ready = this.readyOrder.map((id) => {
      const { group, runs } = this.entries.get(id)!;
      return {
        group: {
          groupId: group.groupId,
          index: group.index,
          epoch: group.epoch,
          batchIndex: group.batchIndex,
          size: group.tasks.length,
        },
        trajectories: runs.flatMap((run) => run!.map((t) => ({ ...t }))),
      };
    });
    return { ready };
  }

  /** Puts back finished groups from a checkpoint; `groupOf` rebuilds each group's tasks. */
  restore(state: PoolState, groupOf: (saved: PooledGroup) => TaskGroup): void {
    for (const saved of state.ready) {
      const group = groupOf(saved.group);
      const runs: Trajectory[][] = group.tasks.map(() => []);
      for (const init of saved.trajectories) runs[init.runId ?? 0]?.push(new Trajectory(init));
      const entry: Entry = {
        group,
        runs,
        finished: group.tasks.length,
        ready: false,
        trajectories: saved.trajectories.length,
        oldest: Infinity,
      };
      this.entries.set(group.groupId, entry);
      this.markReady(entry);
      this.trackBatch(group);
    }
    this.notifier.notify();
  }

  private markReady(entry: Entry): void {
    let oldest = Infinity;
    for (const run of entry.runs)
      for (const t of run!) if (t.policyVersion !== undefined && t.policyVersion < oldest) oldest = t.policyVersion;
    entry.oldest = oldest;
    entry.ready = true;
    this.readyOrder.push(entry.group.groupId);
    this.readyCount += entry.trajectories;
    if (this.readyOldest !== undefined) this.readyOldest = Math.min(this.readyOldest, oldest);
  }

  private readyIds(): string[] | undefined {
    if (this.options.readiness === "batch_size_reached") {
      if (this.readyCount < this.options.batchSize) return undefined;
      const ids: string[] = [];
      let n = 0;
      for (const id of this.readyOrder) {
        if (n >= this.options.batchSize) break;
        ids.push(id);
        n += this.entries.get(id)!.trajectories;
      }
      return ids;
    }
    // The oldest loaded batch, once all of its groups still here have finished (it may be empty
    // when every group was dropped: the trainer then skips the step).
    if (this.batches.size === 0) return undefined;
    const oldest = minOf(this.batches.keys());
    const ids = this.batches.get(oldest)!;
    if (!ids.every((id) => this.entries.get(id)!.ready)) return undefined;
    this.batches.delete(oldest);
    return [...ids];
  }

  private trackBatch(group: TaskGroup): void {
    if (this.options.readiness === "batch_size_reached") return;
    const ids = this.batches.get(group.batchIndex) ?? [];
    ids.push(group.groupId);
    this.batches.set(group.batchIndex, ids);
  }

  private remove(id: string): void {
    this.removeAll(new Set([id]));
  }

  /** Forgets the groups `ids`, in one pass over the ready list. */
  private removeAll(ids: ReadonlySet<string>): void {
    let readyRemoved = false;
    for (const id of ids) {
      const entry = this.entries.get(id);
      if (!entry) continue;
      this.entries.delete(id);
      if (entry.ready) {
        this.readyCount -= entry.trajectories;
        readyRemoved = true;
      }
      const batch = this.batches.get(entry.group.batchIndex);
      if (batch) batch.splice(batch.indexOf(id), 1);
    }
    if (readyRemoved) {
      this.readyOrder = this.readyOrder.filter((id) => !ids.has(id));
      this.readyOldest = undefined;
    }
  }
}
