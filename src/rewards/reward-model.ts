/**
 * The scalar a trained reward model gives an answer, read from per-token logprobs (the one
 * thing every training service computes for any weights): r(x, y) is the model's log-probability
 * of the word ` Yes` after the answer and the question `Is this response good?`. The reward-model
 * trainer raises r for chosen answers over rejected ones, and the `reward_model` judge mode of
 * the math worker scores rollouts with it.
 * @module
 */
import type { WorkerSettings } from "../contracts/worker.js";
import type { SamplingClient, TrainingBackend, TrainingService } from "../contracts/training.js";
import { NexrlError, RecipeError } from "../errors.js";
import type { Tokenizer } from "../wire/tokenizer.js";

/** The question appended after the answer (`prompt tokens`, `response tokens`, then this). */
export const REWARD_MODEL_QUESTION = "\nIs this response good?";

/** The judgement whose log-probability is the reward. */
export const REWARD_MODEL_JUDGEMENT = " Yes";

/** A sequence as the reward model reads it, and which of its tokens make the score. */
export interface RewardModelSequence {
  /** The prompt and response tokens, then the question and the judgement. */
  tokens: number[];
  /** 1 at the judgement's tokens, 0 elsewhere (as long as `tokens`). */
  scored: number[];
}

/**
 * The reward model's input for `tokens` (a prompt and its response, as the policy saw and wrote
 * them): those tokens, then {@link REWARD_MODEL_QUESTION} and {@link REWARD_MODEL_JUDGEMENT}, the
 * judgement's tokens marked as scored.
 */
export function rewardModelSequence(tokenizer: Tokenizer, tokens: readonly number[]): RewardModelSequence {
  const question = tokenizer.encode(REWARD_MODEL_QUESTION);
  const judgement = tokenizer.encode(REWARD_MODEL_JUDGEMENT);
  return {
    tokens: [...tokens, ...question, ...judgement],
    scored: [...tokens.map(() => 0), ...question.map(() => 0), ...judgement.map(() => 1)],
  };
}

/**
 * Scores answers with a trained reward model: r(x, y) = Σ of the model's logprobs of the
 * judgement tokens in {@link rewardModelSequence} (at most 0; higher is better). One forward
 * pass of the reward model's sampler per answer.
 *
 * @example
 * ```ts
 * const scorer = new RewardModelScorer(await service.createSamplingClient(rmSamplerPath), tokenizer);
 * const reward = await scorer.score([...promptTokens, ...responseTokens]);
 * ```
 */
export class RewardModelScorer {
  /**
   * @param sampler the reward model's sampler (or the promise of one).
   * @param tokenizer the tokenizer of the reward model (the policy's: they share the base model).
   */
  constructor(
    private readonly sampler: SamplingClient | Promise<SamplingClient>,
    private readonly tokenizer: Tokenizer,
  ) {}

  /** The reward r(x, y) of `tokens` (prompt then response). */
  async score(tokens: readonly number[]): Promise<number> {
    const sequence = rewardModelSequence(this.tokenizer, tokens);
    const logprobs = await (await this.sampler).computeLogprobs(sequence.tokens);
    let reward = 0;
    sequence.scored.forEach((s, i) => {
      if (s === 1) reward += logprobs[i] ?? 0;
    });
    return reward;
  }
}

/** A run's reward model: the scorer its workers share and the sampler it scores with. */
interface OpenedRewardModel {
  scorer: RewardModelScorer;
  sampler: Promise<SamplingClient>;
}

const rewardModels = new WeakMap<WorkerSettings, OpenedRewardModel | null>();

/**
 * The reward model of a run's recipe (`rollout_worker.agent.math.judge_mode: reward_model`, the
 * sampler of `rollout_worker.reward_model.sampler_path` on the run's training service), made on
 * first use and shared by every worker given the same settings; undefined in the other modes.
 * @throws NexrlError when the worker was given no training service to open the sampler on.
 */
export function rewardModelOf(
  settings: WorkerSettings,
  service: TrainingService | undefined,
  tokenizer: Tokenizer,
): RewardModelScorer | undefined {
  return openedRewardModel(settings, service, tokenizer)?.scorer;
}

function openedRewardModel(
  settings: WorkerSettings,
  service: TrainingService | undefined,
  tokenizer: Tokenizer,
): OpenedRewardModel | undefined {
  const known = rewardModels.get(settings);
  if (known !== undefined) return known ?? undefined;
  const config = settings.rewardModel;
  if (config === undefined) {
    rewardModels.set(settings, null);
    return undefined;
  }
  if (!service)
    throw new NexrlError(
      "judge_mode reward_model scores with a sampler of the run's training service, and this worker was given none (RolloutWorkerContext.service)",
    );
  const sampler = service.createSamplingClient(config.samplerPath);
  // A path that cannot be opened fails the rollouts that score with it, not the process
  // (a run opens it first with openRewardModel, and stops there).
  sampler.catch(() => undefined);
  const opened = { scorer: new RewardModelScorer(sampler, tokenizer), sampler };
  rewardModels.set(settings, opened);
  return opened;
}

/**
 * Opens the reward model of `judge_mode: reward_model` before a run's first rollout (the workers
 * then share that sampler), so that a sampler path the training service cannot open stops the
 * run at start-up instead of failing every rollout. Nothing to do in the other modes.
 * @param recipeFile the recipe, named in the error.
 * @throws {@link RecipeError} naming `rollout_worker.reward_model.sampler_path`, the path and what
 * the service answered.
 */
export async function openRewardModel(
  settings: WorkerSettings,
  service: TrainingService,
  tokenizer: Tokenizer,
  recipeFile?: string,
): Promise<void> {
  const opened = openedRewardModel(settings, service, tokenizer);
  if (!opened) return;
  try {
    await opened.sampler;
  } catch (cause) {
    throw rewardModelPathError(settings.rewardModel!.samplerPath, service.backend, cause, recipeFile);
  }
}

/**
 * The error for a reward-model sampler path that does not open: the key, the path, why, and what
 * to set it to.
 * @param cause what opening it threw.
 */
export function rewardModelPathError(
  samplerPath: string,
  backend: TrainingBackend,
  cause: unknown,
  recipeFile?: string,
): RecipeError {
  const why = cause instanceof Error ? cause.message : String(cause);
  const where =
    backend === "local"
      ? "a sampler_weights/step_*.nxw file it wrote (a relative path resolves against the folder nexrl runs in)"
      : `the ${backend} sampler path its saveWeightsForSampler returned`;
  return RecipeError.fromIssues(
    [
      {
        keyPath: "rollout_worker.reward_model.sampler_path",
        message: `the ${backend} training service cannot open "${samplerPath}" as the reward model's sampler (${why}); train the reward model first (trainer.type: remote_api_reward_model, as recipe/preference/local_reward_model.yaml does) and set this key to ${where}`,
      },
    ],
    { ...(recipeFile !== undefined && { file: recipeFile }), cause },
  );
}
