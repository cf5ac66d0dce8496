/**
 * The rollout-worker contract: what a worker is constructed with (its name, the
 * {@link WorkerSettings} it reads of the recipe, the tokenizer), what `rollout()` may return, and
 * the scope the pipeline attaches during a rollout. {@link BaseRolloutWorker} (in
 * `rollout-worker.ts`) implements it; subclass that to write a worker.
 * @module
 */
import type { LlmJudgeOptions } from "./judge.js";
import type { InferenceClient } from "./inference.js";
import type { TrainingService } from "./training.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import type { Trajectory, TrajectoryInit } from "./trajectory.js";
import type { ClassOptions } from "./options.js";

/**
 * Options of the `agent` and `nexau` workers' episodes (`rollout_worker.agent`, defaults filled),
 * camelCase.
 */
export interface AgentOptions {
  /** Options of the `single_turn_math` agent. */
  readonly math: {
    /** How answers are judged (`agent.math.judge_mode`). */
    readonly judgeMode: "rule" | "llm_judge" | "rule+llm_judge" | "reward_model";
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
  /** The tool-call format of the policy's replies (`service.inference_service.tool_parser`); undefined: the chat template's. */
  readonly toolParser?: string;
  /** How reasoning is split out of replies (`service.inference_service.reasoning_parser`); undefined: the format's own. */
  readonly reasoningParser?: string;
  /** Where the agent gateway listens (`gateway`). */
  readonly gateway: {
    /** Interface to bind. */
    readonly host: string;
    /** Port; 0 picks a free one. */
    readonly port: number;
    /** More host names agents may address it by (`allowed_hosts`). */
    readonly allowedHosts: readonly string[];
    /** Web page origins whose requests it serves, with CORS headers (`cors`). */
    readonly corsOrigins: readonly string[];
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
  /** Options of the `sft` worker (`sft`, defaults filled). */
  readonly sft: {
    /** Which assistant messages without a `weight` are trained (`train_on`). */
    readonly trainOn: "all_assistant_messages" | "last_assistant_message";
  };
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
  /**
   * The trained reward model that scores the math worker's answers (`reward_model`, with
   * `agent.math.judge_mode: reward_model`); undefined otherwise.
   */
  readonly rewardModel:
    | {
        /** Sampler path of the reward model's weights on the run's training service (`sampler_path`). */
        readonly samplerPath: string;
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
  /** The run's training service, for samplers of other models (a reward model); absent outside a run. */
  readonly service?: TrainingService;
  /** The recipe's `rollout_worker.options`, checked by the class's `optionsSchema` when it has one; `{}` when the recipe gives none. */
  readonly options?: ClassOptions;
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
  /** Aborted when the run stops or the attempt is abandoned (its timeout, a hang). */
  readonly signal: AbortSignal;
  /** Receives trajectories passed to `putTrajectory`; throws once the rollout has ended. */
  put(trajectory: Trajectory | TrajectoryInit): void;
}

/** Key of the current {@link RolloutScope} on a worker instance. @internal */
export const ROLLOUT_SCOPE: unique symbol = Symbol.for("nexrl.rolloutScope");

/**
 * A worker as the pipeline sees it during a rollout. The scope is a property under a registered
 * symbol (so a worker class of another copy of nexrl takes it too), not a declared member, so
 * it stays out of the worker's public type. @internal
 */
export interface ScopedWorker {
  [ROLLOUT_SCOPE]?: RolloutScope | undefined;
}
