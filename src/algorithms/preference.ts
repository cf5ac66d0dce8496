/**
 * {@link PreferenceTrainer}: the training step of the trainers that learn from
 * chosen/rejected pairs (DPO, the Bradley–Terry reward model).
 * @module
 */
import type { CustomLossFn } from "../contracts/training.js";
import type { PreferenceSide, Trajectory } from "../contracts/trajectory.js";
import { datum, type Datum } from "../wire/wire.js";
import { InputError } from "../errors.js";
import { rolloutMetrics } from "./rollout-metrics.js";
import { BaseTrainer } from "./base-trainer.js";
import type { TrainStepResult } from "../contracts/trainer.js";

/** A sequence to score and the positions whose logprobs make its score. */
export interface ScoredSequence {
  /** Token ids. */
  tokens: number[];
  /** 1 where a token's logprob counts in the score, 0 elsewhere (as long as `tokens`). */
  scored: number[];
}

/**
 * The training step of pairwise preference trainers. Trajectories come in pairs: the two of one
 * rollout (same `groupId` and `runId`) with `preference` = `chosen` and `rejected`
 * (the `preference` worker makes them from `{prompt, chosen, rejected}` rows; any worker that
 * returns such pairs will do). One step: the pairs become datums `[chosen₀, rejected₀, …]` over
 * the sequences of {@link PreferenceTrainer.scoredSequence}, with `ref_logprobs` when
 * {@link PreferenceTrainer.referenceLogprobs} gives them; the pairwise loss of
 * {@link PreferenceTrainer.pairLoss} runs through `forwardBackwardCustom`, then
 * `optimStep`. Besides the loss's own metrics it reports `train/loss` (the loss),
 * `train/num_datums`, `train/num_tokens` (scored tokens), `train/skipped` and the service's
 * `train/*` and `optim/*` metrics.
 */
export abstract class PreferenceTrainer extends BaseTrainer {
  /** The sequence a trajectory is scored on, and which of its tokens count. */
  protected abstract scoredSequence(trajectory: Trajectory): ScoredSequence;

  /** The pairwise loss over datums `[chosen₀, rejected₀, chosen₁, …]`. */
  protected abstract pairLoss(): CustomLossFn;

  /**
   * Reference logprobs of each sequence (one per token, the first ignored), or undefined for a
   * loss without a reference.
   */
  protected referenceLogprobs(_sequences: readonly ScoredSequence[]): Promise<number[][] | undefined> {
    return Promise.resolve(undefined);
  }

  /** The trajectories as pairs `[chosen₀, rejected₀, chosen₁, …]` (see {@link preferencePairs}). */
  protected prepareTrajectories(trajectories: Trajectory[]): Trajectory[] {
    return preferencePairs(trajectories);
  }

  /**
   * One step on the batch's pairs.
   * @throws InputError for trajectories that do not form chosen/rejected pairs.
   */
  override async train(trajectories: Trajectory[], metrics: Record<string, number>): Promise<TrainStepResult> {
    Object.assign(metrics, rolloutMetrics(trajectories));
    const pairs = this.prepareTrajectories(trajectories);
    const sequences = pairs.map((t) => this.scoredSequence(t));
    const scoredTokens = sequences.reduce((n, s) => n + s.scored.reduce((a, m) => a + m, 0), 0);
    this.putStepSize(metrics, sequences.length, scoredTokens);
    if (sequences.length === 0)
      return { trajectories: pairs, datums: 0, stepped: false, skipReason: "the step had no preference pairs" };
    const reference = await this.referenceLogprobs(sequences);
    const datums: Datum[] = sequences.map((s, i) =>
      datum(s.tokens.slice(0, -1), {
        target_tokens: s.tokens.slice(1),
        weights: s.scored.slice(1),
        ...(reference && { ref_logprobs: reference[i]!.slice(1) }),
      }),
    );
    const fb = await this.forwardBackwardAndStep(metrics, (client) =>
      client.forwardBackwardCustom(datums, this.pairLoss()),
    );
    for (const [key, value] of Object.entries(fb.metrics)) {
      if (key === "loss:sum") metrics["train/loss"] = value;
      else if (key.includes("/")) metrics[key] = value;
      else metrics[`train/${key}`] = value;
    }
    return { trajectories: pairs, datums: datums.length, stepped: true };
  }
}

/** The side a trajectory declares, or why it declares none. */
function sideOf(t: Trajectory): PreferenceSide {
  const side = t.preference;
  if (side === "chosen" || side === "rejected") return side;
  throw new InputError(
    `a preference trainer got a trajectory${t.groupId === undefined ? "" : ` of group ${t.groupId}`} with preference ${JSON.stringify(side) ?? "unset"}; each rollout must return two trajectories marked "chosen" and "rejected" (rollout_worker.type: preference makes them from {prompt, chosen, rejected} rows)`,
  );
}

/**
 * The trajectories ordered as pairs `[chosen₀, rejected₀, chosen₁, …]`: the two trajectories of
 * one rollout (same `groupId` and `runId`), marked `chosen` and `rejected` in their
 * `preference`.
 * @throws InputError for a trajectory without a side, or a rollout that is not exactly one pair.
 */
export function preferencePairs(trajectories: readonly Trajectory[]): Trajectory[] {
  const rollouts = new Map<string, Partial<Record<PreferenceSide, Trajectory>>>();
  trajectories.forEach((t, i) => {
    const key = t.groupId === undefined ? `#${i}` : `${t.groupId}/${t.runId ?? 0}`;
    const pair = rollouts.get(key) ?? {};
    const side = sideOf(t);
    if (pair[side])
      throw new InputError(
        `rollout ${key} returned two "${side}" trajectories; a preference rollout returns one chosen and one rejected`,
      );
    pair[side] = t;
    rollouts.set(key, pair);
  });
  const ordered: Trajectory[] = [];
  for (const [key, pair] of rollouts) {
    if (!pair.chosen || !pair.rejected)
      throw new InputError(
        `rollout ${key} returned only a "${pair.chosen ? "chosen" : "rejected"}" trajectory; a preference rollout returns one chosen and one rejected`,
      );
    ordered.push(pair.chosen, pair.rejected);
  }
  return ordered;
}
