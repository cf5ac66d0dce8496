/**
 * {@link RolloutRunner}: runs rollouts on a fixed set of worker instances with bounded
 * concurrency, a timeout and the failure policy.
 * @module
 */
import Queue from "yocto-queue";
import type { InferenceClient } from "../../services/inference/types.js";
import { Trajectory, type TrajectoryInit } from "../../types/trajectory.js";
import { inRollout, type GuardedRollout } from "../run-guard.js";
import { deriveSeed } from "../seed.js";
import { describeTask, type RolloutTask } from "../task.js";
import { ROLLOUT_SCOPE, type BaseRolloutWorker, type RolloutResult, type RolloutScope } from "../workers/base.js";
import { ATTEMPT_OVER, RolloutInferenceClient, type RolloutSamplingDefaults } from "../workers/rollout-inference.js";
import type { FailurePolicy } from "./failure-policy.js";
import { retryCouldHelp, userFrames } from "./error-origin.js";
import { InputError, NexrlError, RolloutError, UserCodeError } from "../../errors.js";

/** Options of {@link RolloutRunner}. */
export interface RolloutRunnerOptions {
  /** Makes the worker instance of a slot (again after a timeout, which abandons the old one). */
  createWorker(slot: number): BaseRolloutWorker;
  /** Rollouts run at once (`rollout_worker.num_workers`). */
  numWorkers: number;
  /** Milliseconds a rollout may take; 0 for no limit. */
  timeoutMs: number;
  /** What a failure does. */
  policy: FailurePolicy;
  /** The run's inference client, if it has one. */
  inference?: InferenceClient;
  /** Sampling defaults of every inference call. */
  sampling: RolloutSamplingDefaults;
  /** Longest trajectory accepted (`rollout_worker.max_sequence_length`), if limited. */
  maxSequenceLength?: number;
  /** Policy version stamped on trajectories of rollouts that sampled nothing. */
  currentVersion(): number;
  /** Aborts every rollout in flight; their outcomes come back as `aborted`. */
  signal?: AbortSignal;
  /** Told of every failed attempt, and of what the policy did about it (it must not throw). */
  onFailure?(failure: RolloutFailure): void;
  /**
   * Runs each attempt elsewhere (`nexrl worker` processes) instead of on a worker instance of
   * this process; the policy, validation and counters stay here. No worker instance is made.
   */
  remote?: RemoteAttempts;
}

/** What a remote attempt brought back: the trajectories its worker produced and validated. */
export interface RemoteAttemptResult {
  /** The trajectories, each stamped with the task's group, run and policy version. */
  trajectories: Array<Trajectory | TrajectoryInit>;
  /** Sampled ids the tokenizer has no token for. */
  unknownTokenIds: number;
}

/** Runs rollout attempts out of this process (see {@link RolloutRunnerOptions.remote}). */
export interface RemoteAttempts {
  /**
   * Attempt `attempt` of `task`, with `version` the policy version stamped on trajectories that
   * sampled nothing; rejects with the attempt's failure, or when `signal` aborts.
   */
  run(task: RolloutTask, attempt: number, version: number, signal: AbortSignal): Promise<RemoteAttemptResult>;
}

/** What one attempt produced: validated trajectories and the unknown token ids it sampled. */
export interface AttemptResult {
  /** Validated trajectories, in the order the worker produced them. */
  trajectories: Trajectory[];
  /** Sampled ids the tokenizer has no token for. */
  unknownTokenIds: number;
}

/** A failed rollout attempt, for {@link RolloutRunnerOptions.onFailure}. */
export interface RolloutFailure {
  /** The task. */
  task: RolloutTask;
  /** The attempt that failed, 1 for the first. */
  attempt: number;
  /** What went wrong: the worker's error, an `InputError` or a `UserCodeError` (uncaught, timeout or hung). */
  error: unknown;
  /**
   * What the failure policy did: `retry` the task, `skip` it, `stop` the run, or nothing
   * (`none`: an uncaught error raised by a rollout that had already ended, under the `skip` policy).
   */
  action: "retry" | "skip" | "stop" | "none";
}

/** What became of one task. */
export interface RolloutOutcome {
  /** The task. */
  task: RolloutTask;
  /** `ok`: it ran (trajectories may be empty); `skipped`: it failed and the policy skipped it; `aborted`: the run stopped it. */
  status: "ok" | "skipped" | "aborted";
  /** Validated trajectories, in the order the worker produced them. */
  trajectories: Trajectory[];
  /** Attempts made. */
  attempts: number;
}

/** Counters of a {@link RolloutRunner}, since the last {@link RolloutRunner.takeCounts}. */
export interface RolloutCounts {
  /** Rollouts that ran to the end. */
  succeeded: number;
  /** Attempts that failed (exceptions, invalid trajectories, timeouts). */
  failed: number;
  /** Attempts that were retries. */
  retried: number;
  /** Attempts that timed out (also counted in `failed`). */
  timedOut: number;
  /** Tasks given up under the `skip` policy. */
  skipped: number;
  /** Sampled ids the tokenizer has no token for, over every attempt (`InferenceResult.unknownTokenIds`). */
  unknownTokenIds: number;
}

/**
 * A worker instance, the abort controller of its inference calls, and the attempt running on it
 * (or the last one). The controller is replaced only once it has fired (a timeout, the run's
 * stop, or calls still in flight when an attempt ended); an attempt that ends cleanly leaves it
 * to the next.
 */
interface Slot {
  readonly index: number;
  /** Made when the slot first runs an attempt here (never for remote attempts). */
  worker: BaseRolloutWorker | undefined;
  controller: AbortController;
  scope: AttemptScope | undefined;
}

const zeroCounts = (): RolloutCounts => ({
  succeeded: 0,
  failed: 0,
  retried: 0,
  timedOut: 0,
  skipped: 0,
  unknownTokenIds: 0,
});

/** What an ended attempt's `abandon` does. */
function ignore(): void {}

/** Normalises a value a worker produced into a trajectory of this copy of nexrl. */
function toTrajectory(value: Trajectory | TrajectoryInit): Trajectory {
  // A worker compiled against another copy of nexrl builds that copy's Trajectory: copy fields.
  return value instanceof Trajectory
    ? value
    : new Trajectory({ ...value, extraFields: { ...(value.extraFields ?? {}) } });
}

/** The trajectories a rollout returned: one, an array, or none (NexRL workers return status strings such as "success"). */
function outputs(result: RolloutResult): ReadonlyArray<Trajectory | TrajectoryInit> {
  if (Array.isArray(result)) return result;
  if (result !== null && typeof result === "object" && "tokens" in result)
    return [result as Trajectory | TrajectoryInit];
  return [];
}

/**
 * What a worker sees of its current attempt (`putTrajectory`, `inferenceClient`), and the
 * attempt's state. It is also what the process-level guard hands an uncaught error of the
 * attempt's code to.
 */
class AttemptScope implements RolloutScope, GuardedRollout {
  /** Whether the attempt is still running (`putTrajectory` is accepted). */
  open = true;
  readonly inference: RolloutInferenceClient | undefined;
  /** Ends the attempt with a failure from outside (a timeout, a hang, an uncaught error) unless it has ended; set by the runner. */
  abandon: (error: unknown) => void = ignore;
  private readonly produced: Array<Trajectory | TrajectoryInit> = [];

  constructor(
    private readonly runner: RolloutRunner,
    private readonly worker: BaseRolloutWorker,
    readonly task: RolloutTask,
    readonly attempt: number,
    inference: InferenceClient | undefined,
    signal: AbortSignal,
    sampling: RolloutSamplingDefaults,
  ) {
    this.inference =
      inference && new RolloutInferenceClient(inference, deriveSeed(task.seed, attempt), signal, sampling);
  }

  put(trajectory: Trajectory | TrajectoryInit): void {
    if (!this.open)
      throw new Error(
        `${this.worker.name}: putTrajectory was called after the rollout of ${describeTask(this.task)} ended (it returned, failed or timed out)`,
      );
    this.produced.push(trajectory);
  }

  uncaught(error: unknown): boolean {
    return this.runner.uncaught(this, error);
  }

  /** What was put, then what `result` holds. */
  take(result: RolloutResult): ReadonlyArray<Trajectory | TrajectoryInit> {
    return [...this.produced, ...outputs(result)];
  }
}

/**
 * Runs tasks on `numWorkers` worker instances, one rollout per instance at a time (tasks beyond
 * that wait, first come first served). Each attempt gets a {@link RolloutInferenceClient} seeded
 * from the task seed and the attempt number, a timeout, and validation of what it produced:
 * every trajectory must pass `Trajectory.validate()` and fit `maxSequenceLength`, or the attempt
 * fails. Failures follow the {@link FailurePolicy}.
 */
export class RolloutRunner {
  private readonly slots: Slot[] = [];
  /** Slots without a rollout; the last is handed out first. */
  private readonly free: Slot[];
  /** Tasks waiting for a free slot, first come first served. */
  private readonly waiting = new Queue<(slot: Slot) => void>();
  private tally = zeroCounts();

  /** @param options workers, concurrency, timeout, policy and services. */
  constructor(private readonly options: RolloutRunnerOptions) {
    for (let index = 0; index < options.numWorkers; index++)
      this.slots.push({
        index,
        worker: options.remote ? undefined : options.createWorker(index),
        controller: new AbortController(),
        scope: undefined,
      });
    this.free = [...this.slots].reverse();
    const stop = options.signal;
    stop?.addEventListener(
      "abort",
      () => {
        for (const slot of this.slots) slot.controller.abort(stop.reason);
      },
      { once: true },
    );
  }

  /** Rollouts waiting for a free worker plus those running. */
  get busy(): number {
    return this.slots.length - this.free.length + this.waiting.size;
  }

  /** The counters since the last {@link RolloutRunner.takeCounts}, without resetting them. */
  get counts(): Readonly<RolloutCounts> {
    return this.tally;
  }

  /** The counters since the last call, reset. */
  takeCounts(): RolloutCounts {
    const counts = this.tally;
    this.tally = zeroCounts();
    return counts;
  }

  /**
   * Runs `task` under the failure policy once a worker is free.
   * @throws {@link RolloutError} when the policy stops the run.
   */
  async run(task: RolloutTask): Promise<RolloutOutcome> {
    const slot = await this.acquire();
    const { policy, signal } = this.options;
    const aborted = (attempts: number): RolloutOutcome => ({ task, status: "aborted", trajectories: [], attempts });
    try {
      for (let attempt = 0; ; attempt++) {
        if (signal?.aborted) return aborted(attempt);
        if (attempt > 0) this.tally.retried++;
        try {
          const { trajectories } = this.options.remote
            ? await this.remoteAttempt(task, attempt, slot)
            : await this.attempt(task, attempt, slot, this.options.currentVersion());
          this.tally.succeeded++;
          return { task, status: "ok", trajectories, attempts: attempt + 1 };
        } catch (error) {
          if (signal?.aborted) return aborted(attempt + 1);
          this.tally.failed++;
          if (error instanceof UserCodeError && (error.problem === "timeout" || error.problem === "hung"))
            this.tally.timedOut++;
          const retry = attempt < (policy.mode === "fail_fast" ? 0 : policy.retries);
          const action = retry ? "retry" : policy.mode === "skip" ? "skip" : "stop";
          this.options.onFailure?.({ task, attempt: attempt + 1, error, action });
          if (action === "stop") throw this.stopError(task, attempt + 1, error);
          if (action === "skip") {
            this.tally.skipped++;
            return { task, status: "skipped", trajectories: [], attempts: attempt + 1 };
          }
        }
      }
    } finally {
      this.releaseSlot(slot);
    }
  }

  /**
   * Runs attempt `attempt` of `task` once a worker is free, outside the failure policy: what
   * `nexrl worker` does with a task of the driver's. `version` is stamped on trajectories that
   * sampled nothing. Counts the attempt's unknown token ids only.
   * @throws the attempt's failure, as it came.
   */
  async once(task: RolloutTask, attempt: number, version: number): Promise<AttemptResult> {
    const slot = await this.acquire();
    try {
      return await this.attempt(task, attempt, slot, version);
    } finally {
      this.releaseSlot(slot);
    }
  }

  /** A free slot, once there is one (first come first served). */
  private async acquire(): Promise<Slot> {
    return this.free.pop() ?? (await new Promise<Slot>((resolve) => this.waiting.enqueue(resolve)));
  }

  /** Hands `slot` straight to the longest-waiting task, else back to the free list. */
  private releaseSlot(slot: Slot): void {
    const next = this.waiting.dequeue();
    if (next) next(slot);
    else this.free.push(slot);
  }

  /** Attempt `attempt` of `task` on a remote worker, its trajectories validated here as well. */
  private async remoteAttempt(task: RolloutTask, attempt: number, slot: Slot): Promise<AttemptResult> {
    const version = this.options.currentVersion();
    const result = await this.options.remote!.run(task, attempt, version, slot.controller.signal);
    this.tally.unknownTokenIds += result.unknownTokenIds;
    return {
      trajectories: this.accepted(task, result.trajectories, version),
      unknownTokenIds: result.unknownTokenIds,
    };
  }

  /** The tasks of the attempts running now. */
  running(): RolloutTask[] {
    return this.slots.flatMap((slot) => (slot.scope?.open ? [slot.scope.task] : []));
  }

  /**
   * Ends every attempt in flight with a {@link UserCodeError}: the run's guard calls this when
   * the process has nothing left to do, so none of them can ever finish.
   */
  endHung(): void {
    for (const slot of this.slots) {
      const scope = slot.scope;
      if (!scope?.open) continue;
      scope.abandon(
        new UserCodeError(
          "hung",
          `the rollout of ${describeTask(scope.task)} can never finish: its promise was still pending when the process had nothing left to wait for (no timer, socket or file operation); look for a promise in the worker that is never resolved`,
        ),
      );
    }
  }

  /**
   * An uncaught exception or unhandled rejection raised by the code of attempt `scope`: it fails
   * the attempt while it runs. After the attempt ended it is reported as a failure under the
   * `skip` policy and otherwise left to the run (false), which stops.
   * @internal
   */
  uncaught(scope: AttemptScope, error: unknown): boolean {
    const failure = new UserCodeError(
      "uncaught",
      `an uncaught ${error instanceof Error ? `${error.name}: ${error.message}` : `throw of ${String(error)}`} in the rollout of ${describeTask(scope.task)}${scope.open ? "" : ", after it had ended"}`,
      { cause: error },
    );
    if (scope.open) {
      scope.abandon(failure);
      return true;
    }
    if (this.options.policy.mode !== "skip") return false;
    this.options.onFailure?.({ task: scope.task, attempt: scope.attempt + 1, error: failure, action: "none" });
    return true;
  }

  /**
   * Attempt `attempt` of `task` on `slot`: the trajectories it produced, validated, or its
   * failure. The attempt ends once: when the worker's promise settles, or earlier when it is
   * abandoned (a timeout, a hang, an uncaught error of its code), after which the worker's
   * promise is ignored.
   */
  private attempt(task: RolloutTask, attempt: number, slot: Slot, startVersion: number): Promise<AttemptResult> {
    const { options } = this;
    const worker = (slot.worker ??= options.createWorker(slot.index));
    const scope = new AttemptScope(
      this,
      worker,
      task,
      attempt,
      options.inference,
      slot.controller.signal,
      options.sampling,
    );
    worker[ROLLOUT_SCOPE] = scope;
    slot.scope = scope;
    return new Promise<AttemptResult>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      /**
       * Closes the attempt, once: no more puts, its inference calls still in flight aborted, an
       * abandoned worker replaced. False when it had ended already.
       */
      const end = (abandoned: boolean): boolean => {
        if (!scope.open) return false;
        scope.open = false;
        // A function of this module, not of this closure's scope: the scope lives on (a socket
        // opened during the attempt keeps it as its async context) and must not keep the attempt's
        // result alive.
        scope.abandon = ignore;
        clearTimeout(timer);
        scope.inference?.end();
        this.tally.unknownTokenIds += scope.inference?.unknownTokenIds ?? 0;
        if (abandoned || scope.inference?.callsInFlight) {
          slot.controller.abort(ATTEMPT_OVER);
          slot.controller = new AbortController();
        }
        return true;
      };
      scope.abandon = (error) => {
        if (!end(true)) return;
        try {
          // An abandoned rollout may still be running: its instance is left to it and replaced.
          slot.worker = options.createWorker(slot.index);
        } catch (replacing) {
          // Making the replacement failed: that is the attempt's failure now.
          error = replacing;
        }
        reject(error);
      };
      if (options.timeoutMs > 0) {
        const seconds = options.timeoutMs / 1000;
        timer = setTimeout(
          () =>
            scope.abandon(
              new UserCodeError(
                "timeout",
                `the rollout of ${describeTask(task)} took longer than rollout_worker.rollout_timeout_seconds (${seconds} s)`,
              ),
            ),
          options.timeoutMs,
        );
        // The timer alone does not keep the process alive: if nothing else would, the run's guard
        // sees the rollout hang at once instead.
        timer.unref();
      }
      let running: Promise<RolloutResult>;
      try {
        running = Promise.resolve(inRollout(scope, () => worker.rollout(task)));
      } catch (error) {
        // A worker that throws before its first await fails like one that rejects.
        running = Promise.reject(error);
      }
      running.then(
        (result) => {
          if (!end(false)) return;
          try {
            resolve({
              trajectories: this.accepted(
                task,
                scope.take(result),
                scope.inference?.oldestPolicyVersion ?? startVersion,
              ),
              unknownTokenIds: scope.inference?.unknownTokenIds ?? 0,
            });
          } catch (error) {
            reject(error);
          }
        },
        (error: unknown) => {
          if (end(false)) reject(error);
        },
      );
    });
  }

  /** What a rollout produced, each trajectory stamped with the task's fields a worker left unset, and validated. */
  private accepted(
    task: RolloutTask,
    values: ReadonlyArray<Trajectory | TrajectoryInit>,
    version: number,
  ): Trajectory[] {
    const max = this.options.maxSequenceLength;
    return values.map((value) => {
      const t = toTrajectory(value);
      t.groupId ??= task.groupId;
      t.runId ??= task.runId;
      t.policyVersion ??= version;
      t.isVal = task.isVal;
      t.validate();
      if (max !== undefined && t.tokens.length > max) {
        throw new InputError(
          `Trajectory (group ${t.groupId}, run ${t.runId}): tokens has length ${t.tokens.length}, more than rollout_worker.max_sequence_length (${max}); cut it with this.truncate(...) in the worker or raise the limit`,
          { field: "tokens" },
        );
      }
      return t;
    });
  }

  /**
   * The error that stops the run: the rollout, the error, where the user's code raised it, and
   * what to do — retry or skip where a retry could help, else fix the code.
   */
  private stopError(task: RolloutTask, attempts: number, error: unknown): RolloutError {
    const origin = { index: task.index, groupId: task.groupId, runId: task.runId, isVal: task.isVal };
    const failed = `${task.isVal ? "validation " : ""}rollout of ${describeTask(task)} failed after ${attempts} attempt(s)`;
    if (retryCouldHelp(error)) {
      const cause = error instanceof Error ? error.message : String(error);
      const hint =
        this.options.policy.mode === "fail_fast"
          ? "retry failed rollouts with rollout_worker.max_rollout_retries, or skip them with runtime_monitor.exception_handling.policy: continue"
          : "skip failed rollouts with runtime_monitor.exception_handling.policy: continue";
      return new RolloutError(origin, attempts, `${failed}: ${cause}. To keep going, ${hint}`, error);
    }
    // A bug of the worker fails the same way every time: say where it is, not how to retry.
    const frames = userFrames(error instanceof UserCodeError && error.problem === "uncaught" ? error.cause : error);
    const at = frames.length === 0 ? "" : `\n${frames.map((frame) => `    at ${frame}`).join("\n")}`;
    return new RolloutError(
      origin,
      attempts,
      `${failed}: ${describeError(error)}${at}\nA retry would fail the same way: fix the ${frames.length === 0 ? "cause" : "code above"}, then run again (nexrl --verbose or NEXRL_DEBUG=1 prints the whole stack)`,
      error,
    );
  }
}

/** An error as a message shows it: nexrl's own say what they are; others get their class name. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return `a throw of ${String(error)}`;
  return error instanceof NexrlError ? error.message : `${error.name}: ${error.message}`;
}
