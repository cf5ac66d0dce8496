/**
 * The scalar a trained reward model gives an answer, read from per-token logprobs (the one
 * thing every training service computes for any weights): r(x, y) is the model's log-probability
 * of the word ` Yes` after the answer and the question `Is this response good?`. The reward-model
 * trainer raises r for chosen answers over rejected ones, and the `reward_model` judge mode of
 * the math worker scores rollouts with it.
 * @module
 */
import type { WorkerSettings } from "../../contracts/worker.js";
import type { SamplingClient, TrainingService } from "../../services/training/types.js";
import { NexrlError } from "../../errors.js";
import type { Tokenizer } from "../../types/tokenizer.js";

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

const scorers = new WeakMap<WorkerSettings, RewardModelScorer | null>();

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
  const known = scorers.get(settings);
  if (known !== undefined) return known ?? undefined;
  const config = settings.rewardModel;
  if (config === undefined) {
    scorers.set(settings, null);
    return undefined;
  }
  if (!service)
    throw new NexrlError(
      "judge_mode reward_model scores with a sampler of the run's training service, and this worker was given none (RolloutWorkerContext.service)",
    );
  const sampler = service.createSamplingClient(config.samplerPath);
  // A path that cannot be opened fails the rollouts that score with it, not the process.
  sampler.catch(() => undefined);
  const scorer = new RewardModelScorer(sampler, tokenizer);
  scorers.set(settings, scorer);
  return scorer;
}
