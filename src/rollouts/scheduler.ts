/**
 * {@link RolloutScheduler}: decides when tasks are rolled out and hands finished batches to the
 * training loop, for every weight-sync mode.
 * @module
 */
import Queue from "yocto-queue";
import type { DataLoader } from "../data/data-loader.js";
import { Notifier } from "./notifier.js";
import type { TrajectoryPool } from "./pool.js";
import type { RolloutRunner } from "./runner.js";
import type { RolloutTask, TaskGroup } from "../contracts/task.js";
import type { Trajectory } from "../contracts/trajectory.js";

/** Options of {@link RolloutScheduler}. */
export interface RolloutSchedulerOptions {
  /** The training tasks. */
  loader: DataLoader;
  /** Runs rollouts. */
  runner: RolloutRunner;
  /** Collects trajectories. */
  pool: TrajectoryPool;
  /**
   * `batches` (`sync`, `batch-async`): loader batch b is rolled out once policy version
   * b − `lookahead` is released, and trained as one step. `stream` (`fully-async`): groups are
   * rolled out continuously while fewer than (`lookahead` + 1) × `batchSize` trajectories are
   * outstanding; stale groups go back to the loader.
   */
  mode: "batches" | "stream";
  /** Versions rollouts may run ahead of the trainer (`weight.staleness_threshold`; 0 in `sync`). */
  lookahead: number;
  /** Trajectories per training batch (`stream` mode). */
  batchSize: number;
}

/** A batch for the trainer, with what was set aside for staleness on the way. */
export interface ScheduledBatch {
  /** The trajectories, in deterministic order. */
  trajectories: Trajectory[];
  /** Trajectories left out because their group was too stale. */
  staleDropped: number;
  /** Stale groups whose rows were handed out again (`stream` mode). */
  staleRequeued: number;
}

/**
 * Feeds the {@link RolloutRunner} from the {@link DataLoader} as the policy version allows and
 * collects finished groups in the {@link TrajectoryPool}. The training loop calls
 * {@link RolloutScheduler.next} for each step and {@link RolloutScheduler.release} when new
 * weights are live; rollouts keep running in the background in between (in `sync` mode there is
 * nothing to run until the release).
 */
export class RolloutScheduler {
  private released = 0;
  private paused = false;
  private exhausted = false;
  private fatal: { error: unknown } | undefined;
  /** Rollouts started and not yet in the pool. */
  private inFlight = 0;
  /** Launched groups with tasks still running: how many of their tasks are left. */
  private readonly running = new Map<string, { size: number; left: number }>();
  /** Tasks of the groups in `running` (finished ones included until their group is done). */
  private runningTasks = 0;
  /**
   * Launched tasks not yet handed to the runner. The runner gets at most as many at once as it
   * has workers, so a batch's other tasks wait here as plain entries rather than as pending
   * promises with their callbacks (see bench/README.md on what the garbage collector keeps).
   */
  private readonly queued = new Queue<RolloutTask>();
  /** Tasks handed to the runner and not yet finished. */
  private started = 0;
  /**
   * Notified when a group finishes, a rollout stops the run, the data runs out or the last
   * rollout in flight ends: what `next` and `drain` wait for. (Not on every finished rollout:
   * `next` would then look for a batch a thousand times per batch at high concurrency.)
   */
  private readonly wake = new Notifier();

  /** @param options loader, runner, pool and mode. */
  constructor(private readonly options: RolloutSchedulerOptions) {}

  /** True when no rollout is running or waiting for a worker. */
  get idle(): boolean {
    return this.inFlight === 0;
  }

  /** Allows rollouts for policy `version` (the trainer's weights after that many steps are live). */
  release(version: number): void {
    this.released = version;
    this.pump();
  }

  /**
   * The next training batch for a trainer holding policy `trainerVersion`; undefined when the
   * data is exhausted. Rejects with the error of a rollout that stopped the run.
   */
  async next(trainerVersion: number): Promise<ScheduledBatch | undefined> {
    let staleDropped = 0;
    let staleRequeued = 0;
    for (;;) {
      if (this.fatal) throw this.fatal.error;
      this.pump();
      const take = this.options.pool.take(trainerVersion);
      staleDropped += take.staleTrajectories;
      for (const group of take.stale) {
        if (this.options.mode === "stream") {
          this.options.loader.requeue(group);
          staleRequeued++;
        }
      }
      if (take.batch) return { trajectories: take.batch, staleDropped, staleRequeued };
      if (this.exhausted && this.inFlight === 0) return undefined;
      await this.wake.changed();
    }
  }

  /**
   * Stops starting rollouts and waits for those running, so that a checkpoint sees no rollout in
   * flight; {@link RolloutScheduler.resume} starts again.
   */
  async drain(): Promise<void> {
    this.paused = true;
    while (this.inFlight > 0) await this.wake.changed();
    if (this.fatal) throw this.fatal.error;
  }

  /** Starts rollouts again after {@link RolloutScheduler.drain}. */
  resume(): void {
    this.paused = false;
    this.pump();
  }

  private pump(): void {
    if (this.paused || this.exhausted || this.fatal) return;
    const { loader, pool, mode, lookahead, batchSize } = this.options;
    if (mode === "batches") {
      while (loader.batches <= this.released + lookahead) {
        const groups = loader.nextBatch();
        if (!groups) return this.setExhausted();
        groups.forEach((group) => this.launch(group));
      }
      return;
    }
    let outstanding = pool.readyTrajectories + this.runningTasks;
    while (outstanding < (lookahead + 1) * batchSize) {
      const group = loader.nextGroup();
      if (!group) return this.setExhausted();
      this.launch(group);
      outstanding += group.tasks.length;
    }
  }

  private launch(group: TaskGroup): void {
    this.options.pool.register(group);
    this.running.set(group.groupId, { size: group.tasks.length, left: group.tasks.length });
    this.runningTasks += group.tasks.length;
    this.inFlight += group.tasks.length;
    for (const task of group.tasks) this.queued.enqueue(task);
    this.startQueued();
  }

  /** Hands queued tasks to the runner while fewer than its workers are running. */
  private startQueued(): void {
    const { runner, pool } = this.options;
    while (this.started < runner.workers) {
      const task = this.queued.dequeue();
      if (task === undefined) return;
      this.started++;
      runner.run(task).then(
        (outcome) => this.finished(task, outcome.status === "aborted" ? false : pool.put(task, outcome.trajectories)),
        (error: unknown) => {
          this.fatal ??= { error };
          this.finished(task, true);
        },
      );
    }
  }

  /** Bookkeeping once `task` is over; `changed`: a group finished or the run must stop. */
  private finished(task: RolloutTask, changed: boolean): void {
    this.started--;
    this.startQueued();
    if (--this.inFlight === 0 || changed) this.wake.notify();
    const group = this.running.get(task.groupId)!;
    if (--group.left === 0) {
      this.running.delete(task.groupId);
      this.runningTasks -= group.size;
      this.pump();
    }
  }

  private setExhausted(): void {
    this.exhausted = true;
    this.wake.notify();
  }
}
