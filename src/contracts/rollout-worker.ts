/**
 * {@link BaseRolloutWorker}: the class users subclass to turn a task into trajectories.
 * @module
 */
import { NEXRL_BRAND } from "../brand.js";
import type { InferenceClient } from "./inference.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import type { Trajectory, TrajectoryInit } from "./trajectory.js";
import type { DataRow } from "./task.js";
import type { RolloutTask } from "./task.js";
import {
  ROLLOUT_SCOPE,
  type RolloutResult,
  type RolloutScope,
  type ScopedWorker,
  type RolloutWorkerContext,
  type TruncatedSequence,
  type WorkerSettings,
} from "./worker.js";
import type { ClassOptions, OptionsSchema } from "./options.js";
import { NexrlError } from "../errors.js";

/**
 * Turns one task into trajectories. Subclass it and implement {@link BaseRolloutWorker.rollout}
 * (give `Row`, the shape of the data file's rows, to type `task.data`):
 * sample with `this.inferenceClient`, score the answer, and hand over trajectories with
 * `this.putTrajectory(t)` or by returning them. The pipeline runs `rollout_worker.num_workers`
 * instances, each one rollout at a time; it fills in `groupId`, `runId`, `isVal` and
 * `policyVersion` when a trajectory leaves them unset, and validates every trajectory.
 *
 * @example
 * ```ts
 * import { BaseRolloutWorker, Trajectory, type RolloutTask } from "nexrl";
 *
 * export class MyTaskWorker extends BaseRolloutWorker<{ prompt: string; answer: string }> {
 *   async rollout(task: RolloutTask<{ prompt: string; answer: string }>) {
 *     const completion = await this.inferenceClient.completion(String(task.prompt));
 *     const reward = completion.response.trim() === task.data.answer ? 1 : 0;
 *     return this.putTrajectory(new Trajectory({
 *       tokens: [...completion.promptTokens, ...completion.responseTokens],
 *       lossMask: [...completion.promptTokens.map(() => 0), ...completion.responseTokens.map(() => 1)],
 *       reward,
 *     }));
 *   }
 * }
 * ```
 */
export abstract class BaseRolloutWorker<Row extends object = DataRow, Options extends object = ClassOptions> {
  /** Brand recognised by `loadUserClass` across copies of nexrl. */
  static readonly [NEXRL_BRAND] = "nexrl.BaseRolloutWorker";
  /**
   * Checks the recipe's `rollout_worker.options` of a custom subclass before the run starts; its
   * output becomes {@link BaseRolloutWorker.options}. Leave it unset to take the options as written.
   */
  static optionsSchema?: OptionsSchema;
  /** The worker's name. */
  readonly name: string;
  /** What the worker reads of the recipe (`rollout_worker:`, camelCase). */
  readonly settings: WorkerSettings;
  /** The tokenizer of the trained model. */
  readonly tokenizer: Tokenizer;
  /** The recipe's `rollout_worker.options` (after `optionsSchema`, when the class has one); `{}` when it gives none. */
  readonly options: Readonly<Options>;
  /** @param context name, settings and tokenizer, given by the pipeline. */
  constructor(context: RolloutWorkerContext) {
    this.name = context.name;
    this.settings = context.settings;
    this.tokenizer = context.tokenizer;
    this.options = (context.options ?? {}) as Readonly<Options>;
  }

  /**
   * Runs one task. Return trajectories, or pass them to {@link BaseRolloutWorker.putTrajectory};
   * returning nothing and putting nothing gives the task no trajectory. Throwing (or timing out)
   * counts as a failed rollout, handled by the recipe's failure policy.
   */
  abstract rollout(task: RolloutTask<Row>): Promise<RolloutResult> | RolloutResult;

  /**
   * The inference client of the current rollout: the policy being trained, with the recipe's
   * temperature and response length and a per-call seed as defaults.
   * @throws NexrlError outside a rollout, or when the run has no inference service.
   */
  protected get inferenceClient(): InferenceClient {
    const scope = this.scope("inferenceClient");
    if (!scope.inference) {
      throw new NexrlError(
        `${this.name}: this run has no inference service; set rollout_worker.need_llm_inference: true (and a service.inference_service) to sample in rollouts`,
      );
    }
    return scope.inference;
  }

  /**
   * Aborted when the run stops (SIGTERM, Ctrl-C, `runRecipe`'s signal) or the current rollout is
   * abandoned (`rollout_worker.rollout_timeout_seconds`, a hang): hand it to long work of your
   * own (a fetch, a subprocess, a wait) so that it ends then. The inference client's calls
   * already observe it.
   * @throws NexrlError outside a rollout.
   */
  protected get signal(): AbortSignal {
    return this.scope("signal").signal;
  }

  /** Hands a trajectory to the pipeline (it may also be returned from `rollout`). */
  protected putTrajectory(trajectory: Trajectory | TrajectoryInit): void {
    this.scope("putTrajectory").put(trajectory);
  }

  /**
   * Cuts a sequence to `rollout_worker.max_sequence_length` tokens (when set). Call it before
   * scoring: a truncated answer is usually worth reward 0.
   */
  protected truncate(tokens: number[], lossMask: number[], logprobs?: number[]): TruncatedSequence {
    const max = this.settings.maxSequenceLength;
    if (max === undefined || tokens.length <= max) return { tokens, lossMask, logprobs, truncated: false };
    return {
      tokens: tokens.slice(0, max),
      lossMask: lossMask.slice(0, max),
      logprobs: logprobs?.slice(0, max),
      truncated: true,
    };
  }

  private scope(member: string): RolloutScope {
    const scope = (this as ScopedWorker)[ROLLOUT_SCOPE];
    if (!scope) throw new NexrlError(`${this.name}: ${member} is only available while rollout() runs`);
    return scope;
  }
}
