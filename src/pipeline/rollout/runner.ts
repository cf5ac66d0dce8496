/**
 * {@link RolloutRunner}: runs rollouts on a fixed set of worker instances with bounded
 * concurrency, a timeout and the failure policy.
 * @module
 */
import type { InferenceClient } from "../../services/inference/types.js";
import { Trajectory, type TrajectoryInit } from "../../types/trajectory.js";
import { inRollout, type GuardedRollout } from "../run-guard.js";
import { deriveSeed } from "../seed.js";
import { describeTask, type RolloutTask } from "../task.js";
import { ROLLOUT_SCOPE, type BaseRolloutWorker, type RolloutResult, type RolloutScope } from "../workers/base.js";
import { ATTEMPT_OVER, RolloutInferenceClient, type RolloutSamplingDefaults } from "../workers/rollout-inference.js";
import type { FailurePolicy } from "./failure-policy.js";
import { appendAll } from "../../types/arrays.js";
import { InputError, RolloutError, UserCodeError } from "../../errors.js";

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
}

/** A failed rollout attempt, for {@link RolloutRunnerOptions.onFailure}. */
export interface RolloutFailure {
  /** The task. */
  task: RolloutTask;
  /** The attempt that failed, 1 for the first. */
  attempt: number;
  /** What went wrong: the worker's error, a `InputError`, a `UserCodeError`, a `UserCodeError` or an `UserCodeError`. */
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
 * Receives what became of a task handed to {@link RolloutRunner.submit}. Exactly one of the two
 * is called, once; neither may throw.
 */
export interface RolloutReceiver {
  /** The task ran, was skipped or was aborted. */
  outcome(outcome: RolloutOutcome): void;
  /** The failure policy stopped the run on `task` ({@link RolloutError}). */
  failed(task: RolloutTask, error: unknown): void;
}

/**
 * A worker instance and the abort controller of its inference calls. The controller lives as
 * long as the instance and is replaced only when it had to fire (a timeout, or calls still in
 * flight when an attempt ended): on Node 20 an `AbortSignal` costs about 5 µs to make and as
 * much to fire, a third of a loopback rollout's own work if paid per attempt.
 */
interface Slot {
  readonly index: number;
  worker: BaseRolloutWorker;
  controller: AbortController;
  /** The attempt running on the slot, or the last one. */
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

/** Normalises a value a worker produced into a trajectory of this copy of nexrl. */
function toTrajectory(value: Trajectory | TrajectoryInit): Trajectory {
  // A worker compiled against another copy of nexrl builds that copy's Trajectory: copy fields.
  return value instanceof Trajectory
    ? value
    : new Trajectory({ ...value, extraFields: { ...(value.extraFields ?? {}) } });
}

const NONE: ReadonlyArray<Trajectory | TrajectoryInit> = [];

/** Calls the worker's `rollout` (a function, so that `inRollout` needs no closure per attempt). */
function callRollout(worker: BaseRolloutWorker, task: RolloutTask): RolloutResult | Promise<RolloutResult> {
  return worker.rollout(task);
}

function outputs(result: RolloutResult): ReadonlyArray<Trajectory | TrajectoryInit> {
  if (result === undefined || result === null) return NONE;
  if (Array.isArray(result)) return result;
  if (typeof result === "object" && "tokens" in result) return [result as Trajectory | TrajectoryInit];
  // NexRL workers return status strings ("success"); anything else carries no trajectory.
  return NONE;
}

/**
 * What a worker sees of its current attempt (`putTrajectory`, `inferenceClient`), and the
 * attempt's state. It is also what the process-level guard hands an uncaught error of the
 * attempt's code to.
 */
class AttemptScope implements RolloutScope, GuardedRollout {
  /** Whether `putTrajectory` is still accepted. */
  open = true;
  /** Set when the attempt was ended from outside (a timeout, a hang, an uncaught error): its worker instance is replaced. */
  abandoned = false;
  timer: NodeJS.Timeout | undefined;
  /** Ends the attempt with a failure unless it has already ended; set by the runner. */
  abandon: (error: unknown) => void = () => undefined;
  private produced: Array<Trajectory | TrajectoryInit> | undefined;

  constructor(
    private readonly runner: RolloutRunner,
    private readonly worker: BaseRolloutWorker,
    readonly task: RolloutTask,
    readonly attempt: number,
    readonly inference: RolloutInferenceClient | undefined,
  ) {}

  put(trajectory: Trajectory | TrajectoryInit): void {
    if (!this.open)
      throw new Error(
        `${this.worker.name}: putTrajectory was called after the rollout of ${describeTask(this.task)} ended (it returned, failed or timed out)`,
      );
    (this.produced ??= []).push(trajectory);
  }

  uncaught(error: unknown): boolean {
    return this.runner.uncaught(this, error);
  }

  /** What was put, then what `result` holds. */
  take(result: RolloutResult): ReadonlyArray<Trajectory | TrajectoryInit> {
    const returned = outputs(result);
    return this.produced ? [...this.produced, ...returned] : returned;
  }
}

/**
 * Runs tasks on `numWorkers` worker instances, one rollout per instance at a time. Each attempt
 * gets a {@link RolloutInferenceClient} seeded from the task seed and the attempt number, a
 * timeout, and validation of what it produced: every trajectory must pass
 * `Trajectory.validate()` and fit `maxSequenceLength`, or the attempt fails. Failures follow the
 * {@link FailurePolicy}.
 */
export class RolloutRunner {
  private readonly slots: Slot[] = [];
  /** Slots without a rollout; the last is handed out first. */
  private readonly free: Slot[] = [];
  /**
   * Tasks waiting for a slot and their receivers, first come first served
   * (`waiting[waitingHead]` is next): two arrays rather than an entry object per task.
   */
  private waiting: RolloutTask[] = [];
  private waitingReceivers: RolloutReceiver[] = [];
  private waitingHead = 0;
  private tally = zeroCounts();

  /** @param options workers, concurrency, timeout, policy and services. */
  constructor(private readonly options: RolloutRunnerOptions) {
    for (let index = 0; index < options.numWorkers; index++)
      this.slots.push({
        index,
        worker: options.createWorker(index),
        controller: new AbortController(),
        scope: undefined,
      });
    appendAll(this.free, [...this.slots].reverse());
    // One listener for the whole run rather than AbortSignal.any per attempt, which on Node 20
    // costs a weak reference held by the run's signal until it is garbage-collected.
    const stop = options.signal;
    stop?.addEventListener("abort", () => this.slots.forEach((slot) => slot.controller.abort(stop.reason)), {
      once: true,
    });
  }

  /** Rollouts waiting for a free worker plus those running. */
  get busy(): number {
    return this.slots.length - this.free.length + this.waiting.length - this.waitingHead;
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
  run(task: RolloutTask): Promise<RolloutOutcome> {
    return new Promise((resolve, reject) =>
      this.submit(task, { outcome: resolve, failed: (_, error) => reject(error) }),
    );
  }

  /**
   * Runs `task` under the failure policy once a worker is free and tells `receiver` what became
   * of it. A task waiting for a worker is held as data, without a promise or a frame: a loaded
   * batch may hold thousands of them. Rollouts in flight hold as little as possible too (promise
   * chains instead of async functions where they wait): every young-generation collection
   * copies what a thousand waiting rollouts hold.
   */
  submit(task: RolloutTask, receiver: RolloutReceiver): void {
    const slot = this.free.pop();
    if (slot) this.runOn(task, slot, receiver);
    else {
      this.waiting.push(task);
      this.waitingReceivers.push(receiver);
    }
  }

  /** Hands `slot` to the longest-waiting task, or back to the free list. */
  private release(slot: Slot): void {
    if (this.waitingHead === this.waiting.length) {
      this.free.push(slot);
      return;
    }
    const task = this.waiting[this.waitingHead]!;
    const receiver = this.waitingReceivers[this.waitingHead++]!;
    if (this.waitingHead === this.waiting.length) {
      this.waiting = [];
      this.waitingReceivers = [];
      this.waitingHead = 0;
    }
    this.runOn(task, slot, receiver);
  }

  /**
   * Runs attempt `attempt` of `task` on `slot` and, under the failure policy, the retries; then
   * hands the slot on and tells `receiver`. A promise chain rather than an async function, for
   * the reason given at {@link RolloutRunner.submit}.
   */
  private runOn(task: RolloutTask, slot: Slot, receiver: RolloutReceiver, attempt = 0): void {
    if (this.options.signal?.aborted)
      return this.finish(slot, receiver, { task, status: "aborted", trajectories: [], attempts: attempt });
    if (attempt > 0) this.tally.retried++;
    this.attempt(task, attempt, slot, receiver);
  }

  /** After attempt `attempt` of `task` failed with `error`: a retry, a skip, or the end of the run. */
  private attemptFailed(
    task: RolloutTask,
    attempt: number,
    slot: Slot,
    receiver: RolloutReceiver,
    error: unknown,
  ): void {
    const { policy, signal } = this.options;
    if (signal?.aborted)
      return this.finish(slot, receiver, { task, status: "aborted", trajectories: [], attempts: attempt + 1 });
    this.tally.failed++;
    if (error instanceof UserCodeError && (error.problem === "timeout" || error.problem === "hung"))
      this.tally.timedOut++;
    const retry = attempt < (policy.mode === "fail_fast" ? 0 : policy.retries);
    this.options.onFailure?.({
      task,
      attempt: attempt + 1,
      error,
      action: retry ? "retry" : policy.mode === "skip" ? "skip" : "stop",
    });
    if (retry) return this.runOn(task, slot, receiver, attempt + 1);
    if (policy.mode === "skip") {
      this.tally.skipped++;
      return this.finish(slot, receiver, { task, status: "skipped", trajectories: [], attempts: attempt + 1 });
    }
    this.release(slot);
    receiver.failed(task, this.stopError(task, attempt + 1, error));
  }

  /** Hands `slot` on, then tells `receiver` the outcome. */
  private finish(slot: Slot, receiver: RolloutReceiver, outcome: RolloutOutcome): void {
    this.release(slot);
    receiver.outcome(outcome);
  }

  /**
   * Attempt `attempt` of `task` on `slot`; what became of it goes on to `receiver` (or to a
   * retry). The attempt ends once: when the worker's promise settles, or earlier when it is
   * abandoned (a timeout, a hang, an uncaught error of its code), after which the promise is
   * ignored. One promise step, for the reason given at {@link RolloutRunner.submit}.
   */
  private attempt(task: RolloutTask, attempt: number, slot: Slot, receiver: RolloutReceiver): void {
    const { options } = this;
    // runOn returns before an attempt once the run's signal has aborted.
    const inference =
      options.inference &&
      new RolloutInferenceClient(
        options.inference,
        deriveSeed(task.seed, attempt),
        slot.controller.signal,
        options.sampling,
      );
    const scope = new AttemptScope(this, slot.worker, task, attempt, inference);
    slot.worker[ROLLOUT_SCOPE] = scope;
    slot.scope = scope;
    const startVersion = options.currentVersion();
    const failed = (error: unknown): void => {
      if (!scope.open) return;
      try {
        this.endAttempt(slot, scope);
      } catch (replacing) {
        // Making the replacement of an abandoned worker failed: that is the attempt's failure now.
        error = replacing;
      }
      this.attemptFailed(task, attempt, slot, receiver, error);
    };
    scope.abandon = (error) => {
      if (!scope.open) return;
      scope.abandoned = true;
      failed(error);
    };
    if (options.timeoutMs > 0) {
      const ms = options.timeoutMs;
      scope.timer = setTimeout(
        () =>
          scope.abandon(
            new UserCodeError(
              "timeout",
              `the rollout of ${describeTask(task)} took longer than rollout_worker.rollout_timeout_seconds (${ms / 1000} s)`,
            ),
          ),
        ms,
      );
      // The timer alone does not keep the process alive: if nothing else would, the run's guard
      // sees the rollout hang at once instead.
      scope.timer.unref();
    }
    let running: Promise<RolloutResult>;
    try {
      // A worker that throws before its first await fails the attempt like one that rejects.
      running = Promise.resolve(inRollout(scope, callRollout, slot.worker, task));
    } catch (error) {
      running = Promise.reject(error);
    }
    running.then((result) => {
      if (!scope.open) return;
      let trajectories: Trajectory[];
      try {
        this.endAttempt(slot, scope);
        trajectories = this.accepted(task, scope.take(result), inference?.oldestPolicyVersion ?? startVersion);
      } catch (error) {
        return this.attemptFailed(task, attempt, slot, receiver, error);
      }
      this.tally.succeeded++;
      this.finish(slot, receiver, { task, status: "ok", trajectories, attempts: attempt + 1 });
    }, failed);
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

  /** Closes the attempt: no more puts, its inference calls still in flight aborted, an abandoned worker replaced. */
  private endAttempt(slot: Slot, scope: AttemptScope): void {
    scope.open = false;
    clearTimeout(scope.timer);
    this.tally.unknownTokenIds += scope.inference?.unknownTokenIds ?? 0;
    const stragglers = scope.inference?.end() ?? false;
    if (scope.abandoned || stragglers) {
      slot.controller.abort(ATTEMPT_OVER);
      slot.controller = new AbortController();
    }
    // An abandoned rollout may still be running: its instance is left to it and replaced.
    if (scope.abandoned) slot.worker = this.options.createWorker(slot.index);
  }

  /** What a rollout produced, each trajectory stamped and validated. */
  private accepted(
    task: RolloutTask,
    values: ReadonlyArray<Trajectory | TrajectoryInit>,
    version: number,
  ): Trajectory[] {
    const trajectories: Trajectory[] = [];
    for (const value of values) trajectories.push(this.accept(toTrajectory(value), task, version));
    return trajectories;
  }

  /** Fills the task's fields a worker left unset, and validates. */
  private accept(t: Trajectory, task: RolloutTask, version: number): Trajectory {
    t.groupId ??= task.groupId;
    t.runId ??= task.runId;
    t.policyVersion ??= version;
    t.isVal = task.isVal;
    t.validate();
    const max = this.options.maxSequenceLength;
    if (max !== undefined && t.tokens.length > max) {
      throw new InputError(
        `Trajectory (group ${t.groupId}, run ${t.runId}): tokens has length ${t.tokens.length}, more than rollout_worker.max_sequence_length (${max}); cut it with this.truncate(...) in the worker or raise the limit`,
        { field: "tokens" },
      );
    }
    return t;
  }

  private stopError(task: RolloutTask, attempts: number, error: unknown): RolloutError {
    const origin = { index: task.index, groupId: task.groupId, runId: task.runId, isVal: task.isVal };
    const cause = error instanceof Error ? error.message : String(error);
    const hint =
      this.options.policy.mode === "fail_fast"
        ? "retry failed rollouts with rollout_worker.max_rollout_retries, or skip them with runtime_monitor.exception_handling.policy: continue"
        : "skip failed rollouts with runtime_monitor.exception_handling.policy: continue";
    return new RolloutError(
      origin,
      attempts,
      `${task.isVal ? "validation " : ""}rollout of ${describeTask(task)} failed after ${attempts} attempt(s): ${cause}. To keep going, ${hint}`,
      error,
    );
  }
}
