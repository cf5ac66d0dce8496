/**
 * {@link RolloutRunner}: runs rollouts on a fixed set of worker instances with bounded
 * concurrency, a timeout and the failure policy.
 * @module
 */
import Queue from "yocto-queue";
import type { InferenceClient } from "../contracts/inference.js";
import { Trajectory, type TrajectoryInit } from "../contracts/trajectory.js";
import { inRollout, type GuardedRollout } from "./run-guard.js";
import { deriveSeed } from "../data/seed.js";
import { describeTask, type RolloutTask } from "../contracts/task.js";
import { type BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { ROLLOUT_SCOPE, type RolloutResult, type RolloutScope, type ScopedWorker } from "../contracts/worker.js";
import { ATTEMPT_OVER, RolloutInferenceClient, type RolloutSamplingDefaults } from "./rollout-inference.js";
import type { FailurePolicy } from "./failure-policy.js";
import { retryCouldHelp, userFrames } from "./error-origin.js";
import { InputError, NexrlError, RolloutError, UserCodeError } from "../errors.js";

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
  /** The model's vocabulary size, when the service reports it: larger token ids are refused. */
  vocabSize?: number;
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
  /** What the failure policy did. */
  action: FailureAction;
}

/**
 * What the failure policy did with a failed attempt: `retry` the task, `skip` it, `stop` the run,
 * or nothing (`none`: an uncaught error raised by a rollout that had already ended, under the
 * `skip` policy).
 */
export type FailureAction = "retry" | "skip" | "stop" | "none";

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
  /** Made with the slot, or by its first attempt here; never for remote attempts. */
  worker: BaseRolloutWorker | undefined;
  controller: AbortController;
  scope: AttemptScope | undefined;
  /**
   * Times out the slot's attempts: made by the first one and re-armed (`refresh()`) by each
   * later one, so it fires once the latest attempt has run for the timeout; an attempt that
   * ended leaves it armed, and it then finds nothing open.
   */
  timer: NodeJS.Timeout | undefined;
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
  readonly signal: AbortSignal;
  /**
   * Takes the attempt's end; dropped once used, since the scope may outlive the attempt (a socket
   * opened during it keeps it as its async context) and must not keep its result alive.
   */
  settle: AttemptEnd | undefined;
  private readonly produced: Array<Trajectory | TrajectoryInit> = [];

  constructor(
    private readonly runner: RolloutRunner,
    readonly slot: Slot,
    /** The worker instance the attempt runs on. */
    readonly worker: BaseRolloutWorker,
    readonly task: RolloutTask,
    readonly attempt: number,
    /** Policy version stamped on trajectories that sampled nothing (the trainer's when the attempt started). */
    readonly startVersion: number,
  ) {
    const { inference, sampling } = runner.options;
    // The slot's controller of this attempt (an abandoned attempt's slot gets a new one).
    this.signal = slot.controller.signal;
    this.inference =
      inference &&
      new RolloutInferenceClient(inference, deriveSeed(task.seed, attempt), slot.controller.signal, sampling);
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

  /** Ends the attempt with a failure from outside (a timeout, a hang, an uncaught error), unless it has ended. */
  abandon(error: unknown): void {
    this.runner.abandon(this, error);
  }

  /** Ends the attempt's promise with its trajectories. */
  fulfil(trajectories: Trajectory[]): void {
    const settle = this.settle;
    this.settle = undefined;
    settle?.resolve({ trajectories, unknownTokenIds: this.inference?.unknownTokenIds ?? 0 });
  }

  /** Ends the attempt's promise with its failure. */
  fail(error: unknown): void {
    const settle = this.settle;
    this.settle = undefined;
    settle?.reject(error);
  }

  /** What was put, then what `result` holds. */
  take(result: RolloutResult): ReadonlyArray<Trajectory | TrajectoryInit> {
    return [...this.produced, ...outputs(result)];
  }
}

/**
 * Where an attempt's end goes: the task's {@link Job} under the failure policy, or the promise
 * of {@link RolloutRunner.once}.
 */
interface AttemptEnd {
  resolve(result: AttemptResult): void;
  reject(error: unknown): void;
}

/**
 * A task given to {@link RolloutRunner.run}: the promise `run` returned and the attempt running.
 * Each attempt's end comes here, and the runner applies the failure policy to it: the next
 * attempt on the same worker slot, or the outcome. (One promise per task rather than an `async`
 * loop awaiting a promise per attempt: see bench/README.md on what a rollout in flight holds.)
 */
class Job implements AttemptEnd {
  /** The attempt running or about to, 0 for the first. */
  attempt = 0;
  /** The worker slot, once the task has one. */
  slot: Slot | undefined;

  constructor(
    private readonly runner: RolloutRunner,
    readonly task: RolloutTask,
    readonly done: (outcome: RolloutOutcome) => void,
    readonly stopped: (error: unknown) => void,
  ) {}

  /** The attempt succeeded with `result`. */
  resolve(result: AttemptResult): void {
    this.runner.succeeded(this, result.trajectories);
  }

  /** The attempt failed with `error`. */
  reject(error: unknown): void {
    this.runner.attemptFailed(this, error);
  }
}

/** Calls the worker's `rollout` (a function of the module, so that an attempt makes no closure for it). */
function callRollout(worker: BaseRolloutWorker, task: RolloutTask): Promise<RolloutResult> | RolloutResult {
  return worker.rollout(task);
}

/** Abandons the attempt running on `slot` once its timeout has passed. */
function timeOut(slot: Slot, timeoutMs: number): void {
  const scope = slot.scope;
  if (!scope?.open) return;
  scope.abandon(
    new UserCodeError(
      `the rollout of ${describeTask(scope.task)} took longer than rollout_worker.rollout_timeout_seconds (${timeoutMs / 1000} s)`,
      { code: "timeout" },
    ),
  );
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
  /** Tasks waiting for a free slot (and {@link RolloutRunner.once} calls), first come first served. */
  private readonly waiting = new Queue<Job | ((slot: Slot) => void)>();
  private tally = zeroCounts();

  /** @param options workers, concurrency, timeout, policy and services. */
  constructor(
    /** @internal */
    readonly options: RolloutRunnerOptions,
  ) {
    for (let index = 0; index < options.numWorkers; index++)
      this.slots.push({
        index,
        worker: options.remote ? undefined : options.createWorker(index),
        controller: new AbortController(),
        scope: undefined,
        timer: undefined,
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

  /** Worker slots: rollouts that run at once. */
  get workers(): number {
    return this.slots.length;
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
  run(task: RolloutTask): Promise<RolloutOutcome> {
    return new Promise((resolve, reject) => {
      const job = new Job(this, task, resolve, reject);
      const slot = this.free.pop();
      // A task waiting for a worker is a queue entry, not a suspended call: a batch may queue thousands.
      if (slot) this.next(job, slot);
      else this.waiting.enqueue(job);
    });
  }

  /** Starts the next attempt of `job` on `slot`, unless the run stopped. */
  private next(job: Job, slot: Slot): void {
    const { task, attempt } = job;
    if (this.options.signal?.aborted)
      return this.finish(job, { task, status: "aborted", trajectories: [], attempts: attempt });
    if (attempt > 0) this.tally.retried++;
    job.slot = slot;
    if (this.options.remote) this.remoteAttempt(job, slot);
    else this.attempt(job, task, attempt, slot, this.options.currentVersion());
  }

  /** Attempt `job.attempt` succeeded with `trajectories`. @internal */
  succeeded(job: Job, trajectories: Trajectory[]): void {
    this.tally.succeeded++;
    this.finish(job, { task: job.task, status: "ok", trajectories, attempts: job.attempt + 1 });
  }

  /** Attempt `job.attempt` failed with `error`: the policy retries it on the same slot, skips the task or stops the run. @internal */
  attemptFailed(job: Job, error: unknown): void {
    let outcome: RolloutOutcome | undefined;
    try {
      outcome = this.failed(job.task, job.attempt, error);
    } catch (stop) {
      this.release(job.slot!);
      job.stopped(stop);
      return;
    }
    if (outcome) return this.finish(job, outcome);
    job.attempt++;
    this.next(job, job.slot!);
  }

  /** Ends `job` with `outcome` and hands its slot on. */
  private finish(job: Job, outcome: RolloutOutcome): void {
    this.release(job.slot!);
    job.done(outcome);
  }

  /**
   * Runs attempt `attempt` of `task` once a worker is free, outside the failure policy: what
   * `nexrl worker` does with a task of the driver's. `version` is stamped on trajectories that
   * sampled nothing. Counts the attempt's unknown token ids only.
   * @throws the attempt's failure, as it came.
   */
  async once(task: RolloutTask, attempt: number, version: number): Promise<AttemptResult> {
    const slot = this.free.pop() ?? (await new Promise<Slot>((resolve) => this.waiting.enqueue(resolve)));
    try {
      return await new Promise<AttemptResult>((resolve, reject) =>
        this.attempt({ resolve, reject }, task, attempt, slot, version),
      );
    } finally {
      this.release(slot);
    }
  }

  /** Hands `slot` straight to the longest-waiting task, else back to the free list. */
  private release(slot: Slot): void {
    const next = this.waiting.dequeue();
    if (next === undefined) this.free.push(slot);
    else if (next instanceof Job) this.next(next, slot);
    else next(slot);
  }

  /** Attempt `job.attempt` of its task on a remote worker; its end goes to `job`. */
  private remoteAttempt(job: Job, slot: Slot): void {
    this.remoteResult(job.task, job.attempt, slot).then(
      (result) => job.resolve(result),
      (error: unknown) => job.reject(error),
    );
  }

  /** Attempt `attempt` of `task` on a remote worker, its trajectories validated here as well. */
  private async remoteResult(task: RolloutTask, attempt: number, slot: Slot): Promise<AttemptResult> {
    const version = this.options.currentVersion();
    const result = await this.options.remote!.run(task, attempt, version, slot.controller.signal);
    this.tally.unknownTokenIds += result.unknownTokenIds;
    return {
      trajectories: this.accepted(task, result.trajectories, version),
      unknownTokenIds: result.unknownTokenIds,
    };
  }

  /**
   * What the policy does about attempt `attempt` of `task` failing with `error`: the outcome of a
   * task it skips (or the run stopped), undefined for a retry.
   * @throws {@link RolloutError} when the policy stops the run.
   */
  private failed(task: RolloutTask, attempt: number, error: unknown): RolloutOutcome | undefined {
    const { policy, signal } = this.options;
    if (signal?.aborted) return { task, status: "aborted", trajectories: [], attempts: attempt + 1 };
    this.tally.failed++;
    if (error instanceof UserCodeError && (error.code === "timeout" || error.code === "hung")) this.tally.timedOut++;
    const retry = attempt < (policy.mode === "fail_fast" ? 0 : policy.retries);
    const action = retry ? "retry" : policy.mode === "skip" ? "skip" : "stop";
    this.options.onFailure?.({ task, attempt: attempt + 1, error, action });
    if (action === "stop") throw this.stopError(task, attempt + 1, error);
    if (action === "retry") return undefined;
    this.tally.skipped++;
    return { task, status: "skipped", trajectories: [], attempts: attempt + 1 };
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
          `the rollout of ${describeTask(scope.task)} can never finish: its promise was still pending when the process had nothing left to wait for (no timer, socket or file operation); look for a promise in the worker that is never resolved`,
          { code: "hung" },
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
      `an uncaught ${error instanceof Error ? `${error.name}: ${error.message}` : `throw of ${shownValue(error)}`} in the rollout of ${describeTask(scope.task)}${scope.open ? "" : ", after it had ended"}`,
      { code: "uncaught", cause: error },
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
   * Attempt `attempt` of `task` on `slot`; `end` gets the trajectories it produced, validated, or
   * its failure. The attempt ends once: when the worker's promise settles, or earlier when it is
   * abandoned (a timeout, a hang, an uncaught error of its code), after which the worker's
   * promise is ignored.
   */
  private attempt(end: AttemptEnd, task: RolloutTask, attempt: number, slot: Slot, startVersion: number): void {
    const { timeoutMs } = this.options;
    const worker = (slot.worker ??= this.options.createWorker(slot.index));
    const scope = new AttemptScope(this, slot, worker, task, attempt, startVersion);
    scope.settle = end;
    (worker as ScopedWorker)[ROLLOUT_SCOPE] = scope;
    slot.scope = scope;
    if (timeoutMs > 0) {
      // The timer alone does not keep the process alive: if nothing else would, the run's guard
      // sees the rollout hang at once instead.
      if (slot.timer) slot.timer.refresh();
      else slot.timer = setTimeout(timeOut, timeoutMs, slot, timeoutMs).unref();
    }
    let running: Promise<RolloutResult>;
    try {
      running = Promise.resolve(inRollout(scope, callRollout, worker, task));
    } catch (error) {
      // A worker that throws before its first await fails like one that rejects.
      running = Promise.reject(error);
    }
    running.then(
      (result) => this.returned(scope, result),
      (error: unknown) => {
        if (this.end(scope, false)) scope.fail(error);
      },
    );
  }

  /** The worker's rollout of `scope` returned `result`: its trajectories, unless the attempt had ended. */
  private returned(scope: AttemptScope, result: RolloutResult): void {
    if (!this.end(scope, false)) return;
    let trajectories: Trajectory[];
    try {
      trajectories = this.accepted(
        scope.task,
        scope.take(result),
        scope.inference?.oldestPolicyVersion ?? scope.startVersion,
      );
    } catch (error) {
      return scope.fail(error);
    }
    scope.fulfil(trajectories);
  }

  /** Ends the attempt of `scope` with `error` from outside (a timeout, a hang, an uncaught error), unless it has ended. @internal */
  abandon(scope: AttemptScope, error: unknown): void {
    if (!this.end(scope, true)) return;
    const slot = scope.slot;
    try {
      // An abandoned rollout may still be running: its instance is left to it and replaced.
      slot.worker = this.options.createWorker(slot.index);
    } catch (replacing) {
      // Making the replacement failed: that is the attempt's failure now.
      error = replacing;
    }
    scope.fail(error);
  }

  /**
   * Closes the attempt of `scope`, once: no more puts, its inference calls still in flight
   * aborted, an abandoned worker's controller replaced. False when it had ended already.
   */
  private end(scope: AttemptScope, abandoned: boolean): boolean {
    if (!scope.open) return false;
    scope.open = false;
    scope.inference?.end();
    this.tally.unknownTokenIds += scope.inference?.unknownTokenIds ?? 0;
    if (abandoned || scope.inference?.callsInFlight) {
      const slot = scope.slot;
      slot.controller.abort(ATTEMPT_OVER);
      slot.controller = new AbortController();
    }
    return true;
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
      checkSequenceLength(t, max);
      checkTokenIds(t, this.options.vocabSize);
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
      const cause = error instanceof Error ? error.message : shownValue(error);
      const hint =
        this.options.policy.mode === "fail_fast"
          ? "retry failed rollouts with rollout_worker.max_rollout_retries, or skip them with runtime_monitor.exception_handling.policy: continue"
          : "skip failed rollouts with runtime_monitor.exception_handling.policy: continue";
      return new RolloutError(`${failed}: ${cause}. To keep going, ${hint}`, { origin, attempts, cause: error });
    }
    // A bug of the worker fails the same way every time: say where it is, not how to retry.
    const frames = userFrames(error instanceof UserCodeError && error.code === "uncaught" ? error.cause : error);
    const at = frames.length === 0 ? "" : `\n${frames.map((frame) => `    at ${frame}`).join("\n")}`;
    return new RolloutError(
      `${failed}: ${describeError(error)}${at}\nA retry would fail the same way: fix the ${frames.length === 0 ? "cause" : "code above"}, then run again (nexrl --verbose or NEXRL_DEBUG=1 prints the whole stack)`,
      { origin, attempts, cause: error },
    );
  }
}

/** A thrown value that is not an Error, as a reader can see it: its JSON when it has one (not `[object Object]`). */
export function shownValue(value: unknown): string {
  if (typeof value === "object" && value !== null) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) return json.length > 500 ? `${json.slice(0, 500)}…` : json;
    } catch {
      // A cycle, a BigInt: fall back to its string.
    }
  }
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** An error as a message shows it: nexrl's own say what they are; others get their class name. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return `a throw of ${shownValue(error)}`;
  return error instanceof NexrlError ? error.message : `${error.name}: ${error.message}`;
}

/**
 * Refuses a trajectory holding a token id the model has no embedding for, naming the rollout
 * here rather than a datum at training.
 * @throws {@link "nexrl/errors".InputError | InputError} for the first such id.
 */
function checkTokenIds(t: Trajectory, vocabSize: number | undefined): void {
  if (vocabSize === undefined) return;
  const at = t.tokens.findIndex((id) => id >= vocabSize);
  if (at === -1) return;
  throw new InputError(
    `Trajectory (group ${t.groupId}, run ${t.runId}): tokens[${at}] is ${t.tokens[at]}, outside the model's vocabulary (ids 0..${vocabSize - 1}); encode text with the run's tokenizer (this.tokenizer in a worker)`,
    { field: "tokens" },
  );
}

/**
 * Refuses a trajectory longer than `rollout_worker.max_sequence_length` (`max`; undefined for no limit).
 * @throws {@link "nexrl/errors".InputError | InputError} naming the trajectory, its length and the limit.
 */
export function checkSequenceLength(t: Trajectory, max: number | undefined): void {
  if (max !== undefined && t.tokens.length > max) {
    throw new InputError(
      `Trajectory (group ${t.groupId}, run ${t.runId}): tokens has length ${t.tokens.length}, more than rollout_worker.max_sequence_length (${max}); cut it with this.truncate(...) in the worker or raise the limit`,
      { field: "tokens" },
    );
  }
}
