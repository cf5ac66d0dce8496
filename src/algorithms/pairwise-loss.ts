/**
 * The pairwise logistic loss of preference learning, as a {@link CustomLossFn}: DPO (with
 * reference logprobs and β) and the Bradley–Terry reward model (β = 1, no reference) are the same
 * loss over different sequences.
 * @module
 */
import { InputError } from "../errors.js";
import type { CustomLossFn, CustomLossResult } from "../contracts/training.js";
import type { Datum } from "../wire/wire.js";

/** Options of {@link pairwiseLogisticLoss}. */
export interface PairwiseLossOptions {
  /** Scale of the score difference inside the sigmoid (DPO's β; 1 for a reward model). */
  beta: number;
  /** Prefix of the metric names: `dpo` gives `dpo/margin`, `dpo/accuracy`… */
  metricPrefix: string;
}

/**
 * Margins this close to 0 are ties: float32 noise between two passes over the same weights (at
 * DPO's first step the policy is its reference), which count half in the accuracy.
 */
const TIE = 1e-6;

/** Σ_t w_t·x_t. */
function weightedSum(weights: ArrayLike<number>, values: ArrayLike<number>): number {
  let s = 0;
  for (let t = 0; t < weights.length; t++) s += weights[t]! * values[t]!;
  return s;
}

/** −log σ(x), computed without overflow for large |x|. */
function negLogSigmoid(x: number): number {
  return x >= 0 ? Math.log1p(Math.exp(-x)) : -x + Math.log1p(Math.exp(x));
}

/** σ(x). */
function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

function weightsOf(d: Datum, i: number): number[] {
  const weights = d.loss_fn_inputs.weights?.data;
  if (weights === undefined)
    throw new InputError(`pairwise loss: datum ${i} has no loss input "weights" marking the scored tokens`);
  return weights;
}

/**
 * The pairwise logistic loss over datums laid out as pairs `[chosen₀, rejected₀, chosen₁, …]`.
 * A datum's score is S = Σ_t w_t·lp_t over its `weights` (the response tokens for DPO, the
 * judgement tokens for a reward model), minus Σ_t w_t·ref_t when it carries `ref_logprobs`. Each
 * pair's margin is m = β·(S_chosen − S_rejected) and the loss is the mean over pairs of
 * −log σ(m). Metrics, with `prefix` = {@link PairwiseLossOptions.metricPrefix}:
 * `<prefix>/loss` (the mean loss), `<prefix>/margin` (mean m), `<prefix>/accuracy` (fraction of
 * pairs with m > 0, a tie |m| ≤ 1e-6 counting one half: at DPO's first step, when the policy is
 * its reference, every margin is float noise around 0 and the accuracy is 0.5),
 * `<prefix>/chosen_reward` and `<prefix>/rejected_reward` (mean β·S of each side) and
 * `<prefix>/num_pairs`.
 *
 * @example
 * ```ts
 * const output = await (await client.forwardBackwardCustom(pairs, pairwiseLogisticLoss({ beta: 0.1, metricPrefix: "dpo" }))).result();
 * output.metrics["dpo/accuracy"];
 * ```
 * @throws InputError (from the returned function) for an odd number of datums or a datum
 * without `weights`.
 */
export function pairwiseLogisticLoss(options: PairwiseLossOptions): CustomLossFn {
  const { beta, metricPrefix: prefix } = options;
  return (data, logprobs): CustomLossResult => {
    if (data.length === 0 || data.length % 2 !== 0)
      throw new InputError(
        `pairwise loss: ${data.length} datums; they must come in pairs [chosen, rejected, chosen, rejected, …]`,
      );
    const pairs = data.length / 2;
    const score = (i: number): number => {
      const w = weightsOf(data[i]!, i);
      const ref = data[i]!.loss_fn_inputs.ref_logprobs?.data;
      return weightedSum(w, logprobs[i]!) - (ref === undefined ? 0 : weightedSum(w, ref));
    };
    const gradLogprobs: number[][] = logprobs.map((lp) => new Array<number>(lp.length).fill(0));
    let loss = 0;
    let margins = 0;
    let correct = 0;
    let chosenReward = 0;
    let rejectedReward = 0;
    for (let k = 0; k < data.length; k += 2) {
      const chosen = beta * score(k);
      const rejected = beta * score(k + 1);
      const margin = chosen - rejected;
      loss += negLogSigmoid(margin) / pairs;
      margins += margin / pairs;
      if (Math.abs(margin) <= TIE) correct += 0.5;
      else if (margin > 0) correct++;
      chosenReward += chosen / pairs;
      rejectedReward += rejected / pairs;
      // ∂(−log σ(m))/∂m = −σ(−m); ∂m/∂lp_chosen,t = β·w_t and ∂m/∂lp_rejected,t = −β·w_t.
      const g = (-sigmoid(-margin) * beta) / pairs;
      weightsOf(data[k]!, k).forEach((w, t) => (gradLogprobs[k]![t] = g * w));
      weightsOf(data[k + 1]!, k + 1).forEach((w, t) => (gradLogprobs[k + 1]![t] = -g * w));
    }
    return {
      loss,
      gradLogprobs,
      metrics: {
        [`${prefix}/loss`]: loss,
        [`${prefix}/margin`]: margins,
        [`${prefix}/accuracy`]: correct / pairs,
        [`${prefix}/chosen_reward`]: chosenReward,
        [`${prefix}/rejected_reward`]: rejectedReward,
        [`${prefix}/num_pairs`]: pairs,
      },
    };
  };
}
