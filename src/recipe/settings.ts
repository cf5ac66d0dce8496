/**
 * The recipe as workers and trainers see it: the typed, camelCase slices of the parsed recipe
 * ({@link WorkerSettings}, {@link TrainerSettings}), built here and nowhere else. Recipes keep
 * their snake_case YAML keys; TypeScript code reads these.
 * @module
 */
import type { RecipeConfig } from "./schema/recipe.js";
import { agentOptionsSchema } from "./schema/rollout-worker.js";
import { DEFAULT_GROUP_RUBRIC, DEFAULT_SCORE_RUBRIC } from "./schema/judge.js";
import type { AlgorithmConfig, TrainerSettings } from "../contracts/trainer.js";
import type { AgentOptions, WorkerSettings } from "../contracts/worker.js";

/** The {@link AlgorithmConfig} of a parsed recipe. */
function algorithmConfig(recipe: RecipeConfig): AlgorithmConfig {
  const a = recipe.trainer.algorithm;
  return {
    lossFn: a.loss_fn,
    lossFnConfig: { ...a.loss_fn_config },
    learningRate: a.learning_rate,
    beta1: a.beta1,
    beta2: a.beta2,
    eps: a.eps,
    weightDecay: a.weight_decay,
    gradClipNorm: a.grad_clip_norm,
    entropyCoeff: a.entropy_coeff,
    klPenaltyCoef: a.kl_penalty_coef,
    klDiscountFactor: a.kl_discount_factor,
  };
}

/** The {@link TrainerSettings} of a parsed recipe. */
export function trainerSettings(recipe: RecipeConfig): TrainerSettings {
  const teacher = recipe.trainer.teachers?.[0];
  return {
    algorithm: algorithmConfig(recipe),
    teacher: teacher && { baseModel: teacher.base_model, checkpoint: teacher.checkpoint ?? undefined },
    totalTrainSteps: recipe.trainer.total_train_steps,
    dpo: { beta: recipe.trainer.dpo?.beta ?? 0.1, reference: recipe.trainer.dpo?.reference ?? undefined },
  };
}

/** `rollout_worker.agent` of a parsed recipe, defaults filled. */
function agentOptions(recipe: RecipeConfig): AgentOptions {
  const agent = recipe.rollout_worker.agent ?? agentOptionsSchema.parse({});
  const inference = recipe.service.inference_service;
  return {
    math: { judgeMode: agent.math.judge_mode },
    maxTurns: agent.max_turns,
    maxTokens: agent.max_tokens,
    timeoutSeconds: agent.timeout_seconds,
    truncatedReward: agent.truncated_reward,
    trajectoryWeight: agent.trajectory_weight,
    replayAnswers: agent.replay_answers,
    external: agent.external,
    gateway: {
      host: agent.gateway.host,
      port: agent.gateway.port,
      allowedHosts: agent.gateway.allowed_hosts,
      corsOrigins: agent.gateway.cors,
    },
    ...(inference.tool_parser !== undefined && { toolParser: inference.tool_parser }),
    ...(inference.reasoning_parser !== undefined && { reasoningParser: inference.reasoning_parser }),
  };
}

/** The math worker's LLM judge of a parsed recipe, when `agent.math.judge_mode` asks for one. */
function mathJudgeSettings(recipe: RecipeConfig): WorkerSettings["mathJudge"] {
  const judgeMode = recipe.rollout_worker.agent?.math.judge_mode ?? "rule";
  const config = recipe.rollout_worker.judge;
  if ((judgeMode !== "llm_judge" && judgeMode !== "rule+llm_judge") || config === undefined) return undefined;
  return {
    judgeMode,
    mode: config.mode,
    apiKeyEnv: config.api_key_env,
    judge: {
      baseUrl: config.base_url,
      model: config.model,
      scoreRubric: config.mode === "score" ? (config.rubric ?? DEFAULT_SCORE_RUBRIC) : DEFAULT_SCORE_RUBRIC,
      rankRubric: config.mode === "group_rank" ? (config.rubric ?? DEFAULT_GROUP_RUBRIC) : DEFAULT_GROUP_RUBRIC,
      temperature: config.temperature,
      maxTokens: config.max_tokens,
      maxConcurrency: config.max_concurrency,
      timeoutMs: config.timeout_seconds * 1000,
      maxRetries: config.max_retries,
      cache: config.cache,
    },
  };
}

const workerSettingsOf = new WeakMap<RecipeConfig, WorkerSettings>();

/**
 * The {@link WorkerSettings} of a parsed recipe. The same recipe object gives the same settings
 * object, so that what the run's workers share (the math judge) is made once.
 */
export function workerSettings(recipe: RecipeConfig): WorkerSettings {
  let settings = workerSettingsOf.get(recipe);
  if (settings === undefined) {
    const worker = recipe.rollout_worker;
    settings = {
      temperature: worker.temperature,
      maxResponseLength: worker.max_response_length,
      maxSequenceLength: worker.max_sequence_length,
      taskName: worker.task_name,
      enableTracePrefixMerge: worker.enable_trace_prefix_merge,
      agent: agentOptions(recipe),
      sft: { trainOn: worker.sft?.train_on ?? "all_assistant_messages" },
      mathJudge: mathJudgeSettings(recipe),
      rewardModel:
        worker.agent?.math.judge_mode === "reward_model" && worker.reward_model !== undefined
          ? { samplerPath: worker.reward_model.sampler_path }
          : undefined,
    };
    workerSettingsOf.set(recipe, settings);
  }
  return settings;
}
