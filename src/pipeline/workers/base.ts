/**
 * {@link BaseRolloutWorker}: the class users subclass to turn a task into trajectories.
 * @module
 */
import { NEXRL_BRAND } from "../../recipe/brand.js";
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import type { InferenceClient } from "../../services/inference/types.js";
import type { LlmJudgeOptions } from "../rewards/llm-judge.js";
import type { Tokenizer } from "../../types/tokenizer.js";
import type { Trajectory, TrajectoryInit } from "../../types/trajectory.js";
import type { DataRow } from "../data/files.js";
import type { RolloutTask } from "../task.js";
import { NexrlError } from "../../errors.js";

/**
 * The `rollout_worker:` section of a parsed recipe, as the recipe spells it (snake_case). Workers
 * read {@link WorkerSettings} instead.
 */
export type RolloutWorkerConfig = RecipeConfig["rollout_worker"];

/**
 * Options of the `agent` and `nexau` workers' episodes (`rollout_worker.agent`, defaults filled),
 * camelCase.
 */
export interface AgentOptions {
  /** Options of the `single_turn_math` agent. */
  readonly math: {
    /** How answers are judged (`agent.math.judge_mode`). */
    readonly judgeMode: "rule" | "llm_judge" | "rule+llm_judge";
  };
  /** Most model calls per episode (`max_turns`). */
  readonly maxTurns: number;
  /** Most tokens sampled per episode, all calls together (`max_tokens`); undefined for no limit. */
  readonly maxTokens: number | undefined;
  /** Seconds an episode may run before it is cut short (`timeout_seconds`); 0 for no limit. */
  readonly timeoutSeconds: number;
  /** Reward of a truncated episode (`truncated_reward`); null keeps the evaluator's. */
  readonly truncatedReward: number | null;
  /** Loss weight of each trajectory of an episode (`trajectory_weight`). */
  readonly trajectoryWeight: "inverse_count" | "one";
  /** How an answer the agent sends back unchanged is rendered (`replay_answers`). */
  readonly replayAnswers: "tokens" | "text";
  /** Offer tasks to agents in other processes (`external`). */
  readonly external: boolean;
  /** Where the agent gateway listens (`gateway`). */
  readonly gateway: {
    /** Interface to bind. */
    readonly host: string;
    /** Port; 0 picks a free one. */
    readonly port: number;
  };
}

/**
 * The part of the recipe a rollout worker reads (`rollout_worker:`), camelCase, built by the
 * pipeline from the parsed recipe. Every worker of a run gets the same object.
 */
export interface WorkerSettings {
  /** Sampling temperature (`temperature`), the default of `this.inferenceClient`. */
  readonly temperature: number;
  /** Most tokens sampled per response (`max_response_length`), the default of `this.inferenceClient`. */
  readonly maxResponseLength: number;
  /** Longest trajectory, prompt and response (`max_sequence_length`); undefined for no limit. */
  readonly maxSequenceLength: number | undefined;
  /** Name of the task, for traces and metrics (`task_name`). */
  readonly taskName: string | undefined;
  /** Merge an agent's consecutive calls into one trajectory when their token histories continue (`enable_trace_prefix_merge`). */
  readonly enableTracePrefixMerge: boolean;
  /** Options of agent episodes (`agent`). */
  readonly agent: AgentOptions;
  /**
   * The LLM judge of the math worker (`judge`, with `agent.math.judge_mode` other than `rule`);
   * undefined otherwise. The API key is not here: it is read from `apiKeyEnv` when the judge is made.
   */
  readonly mathJudge:
    | {
        /** How answers are judged. */
        readonly judgeMode: "llm_judge" | "rule+llm_judge";
        /** Whether the judge scores each answer or ranks a group's answers together. */
        readonly mode: "score" | "group_rank";
        /** The environment variable holding the judge's API key; undefined for none. */
        readonly apiKeyEnv: string | undefined;
        /** The judge's endpoint, model, rubrics and limits. */
        readonly judge: Readonly<Omit<LlmJudgeOptions, "apiKey">>;
      }
    | undefined;
}

/** What a rollout worker is constructed with. */
export interface RolloutWorkerContext {
  /** The worker's name, `rollout_worker-<slot>` (`validation_worker-<slot>` for validation). */
  readonly name: string;
  /** What the worker reads of the recipe. */
  readonly settings: WorkerSettings;
  /** The tokenizer of the trained model. */
  readonly tokenizer: Tokenizer;
}

/** A sequence cut by {@link BaseRolloutWorker.truncate}. */
export interface TruncatedSequence {
  /** The tokens, at most `max_sequence_length`. */
  tokens: number[];
  /** The loss mask, cut alike. */
  lossMask: number[];
  /** The logprobs, cut alike, when given. */
  logprobs: number[] | undefined;
  /** Whether anything was cut. */
  truncated: boolean;
}

/** What `rollout()` may return: trajectories (built or as plain objects), or nothing after `putTrajectory`. */
export type RolloutResult = Trajectory | TrajectoryInit | ReadonlyArray<Trajectory | TrajectoryInit> | void | undefined;

/**
 * What the pipeline attaches to a worker for the duration of one rollout. It lives under a
 * `Symbol.for` key so that a worker class compiled against another copy of nexrl (a user module
 * importing the built package) talks to this pipeline the same way.
 * @internal
 */
export interface RolloutScope {
  /** The rollout's inference client, when the run has one. */
  readonly inference: InferenceClient | undefined;
  /** Receives trajectories passed to `putTrajectory`; throws once the rollout has ended. */
  put(trajectory: Trajectory | TrajectoryInit): void;
}

/** Key of the current {@link RolloutScope} on a worker instance. @internal */
export const ROLLOUT_SCOPE: unique symbol = Symbol.for("nexrl.rolloutScope");

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
export abstract class BaseRolloutWorker<Row extends object = DataRow> {
  /** Brand recognised by `loadUserClass` across copies of nexrl. */
  static readonly [NEXRL_BRAND] = "nexrl.BaseRolloutWorker";
  /** The worker's name. */
  readonly name: string;
  /** What the worker reads of the recipe (`rollout_worker:`, camelCase). */
  readonly settings: WorkerSettings;
  /** The tokenizer of the trained model. */
  readonly tokenizer: Tokenizer;
  /** Set by the pipeline during a rollout. @internal */
  declare [ROLLOUT_SCOPE]: RolloutScope | undefined;

  /** @param context name, settings and tokenizer, given by the pipeline. */
  constructor(context: RolloutWorkerContext) {
    this.name = context.name;
    this.settings = context.settings;
    this.tokenizer = context.tokenizer;
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
    const scope = this[ROLLOUT_SCOPE];
    if (!scope) throw new NexrlError(`${this.name}: ${member} is only available while rollout() runs`);
    return scope;
  }
}
