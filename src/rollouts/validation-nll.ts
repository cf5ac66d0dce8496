/**
 * Held-out negative log-likelihood: how well the current weights predict the targets of the
 * validation rows, the standard metric of supervised fine-tuning.
 * @module
 */
import type { LossBackend } from "../contracts/losses.js";
import { Trajectory } from "../contracts/trajectory.js";
import type { TrainingClient } from "../contracts/training.js";
import { trajectoryToDatum } from "../algorithms/datums.js";
import { InputError } from "../errors.js";

/**
 * The `extraFields` key of a validation trajectory's target: the sequence the model should have
 * written, with a loss mask over the tokens to score (a {@link ValidationTarget}). The `sft` worker
 * sets it; a custom worker may too. The validator scores it into `val/nll`, and `samples.jsonl`
 * leaves it out.
 */
export const VALIDATION_TARGET = "validation_target";

/** What {@link VALIDATION_TARGET} holds (keys as in JSON). */
export interface ValidationTarget {
  /** The target sequence, prompt and answer. */
  tokens: number[];
  /** 1 on the tokens whose likelihood is measured (the answer), 0 elsewhere. */
  loss_mask: number[];
}

/** The sums of a {@link TargetScorer} pass. */
export interface TargetScore {
  /** Negative logprob summed over the scored tokens. */
  nll: number;
  /** Tokens scored. */
  tokens: number;
}

/** Scores validation targets with the current weights. */
export type TargetScorer = (targets: readonly ValidationTarget[]) => Promise<TargetScore>;

/** The validation target a trajectory carries, checked, or undefined when it has none. */
export function validationTargetOf(extraFields: Readonly<Record<string, unknown>>): ValidationTarget | undefined {
  const target = extraFields[VALIDATION_TARGET];
  if (target === undefined) return undefined;
  const { tokens, loss_mask: mask } = (target ?? {}) as Partial<ValidationTarget>;
  if (!Array.isArray(tokens) || !Array.isArray(mask) || tokens.length !== mask.length)
    throw new InputError(
      `extraFields.${VALIDATION_TARGET} must be {"tokens": [...], "loss_mask": [...]} with one mask value per token`,
    );
  return { tokens, loss_mask: mask };
}

/**
 * A {@link TargetScorer} over the training client's `forward` (no gradients, the weights as
 * trained so far): one `cross_entropy` pass over every target, the negative logprobs of the
 * masked tokens summed.
 */
export function forwardTargetScorer(client: TrainingClient, backend: LossBackend): TargetScorer {
  return async (targets) => {
    const datums = [];
    const masks: number[][] = [];
    for (const target of targets) {
      const datum = trajectoryToDatum(
        new Trajectory({ tokens: target.tokens, lossMask: target.loss_mask, reward: 0 }),
        {
          lossFn: "cross_entropy",
          backend,
        },
      );
      if (!datum) continue;
      datums.push(datum);
      masks.push(target.loss_mask.slice(1));
    }
    if (datums.length === 0) return { nll: 0, tokens: 0 };
    const output = await (await client.forward(datums, "cross_entropy")).result();
    let nll = 0;
    let tokens = 0;
    masks.forEach((mask, i) => {
      const logprobs = output.lossFnOutputs[i]?.logprobs ?? [];
      mask.forEach((m, j) => {
        if (m === 0) return;
        nll -= logprobs[j] ?? 0;
        tokens++;
      });
    });
    return { nll, tokens };
  };
}
