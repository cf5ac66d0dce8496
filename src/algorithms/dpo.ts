/**
 * The `remote_api_dpo` trainer: direct preference optimisation.
 * @module
 */
import type { CustomLossFn } from "../contracts/training.js";
import type { SamplingClient } from "../contracts/training.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { pairwiseLogisticLoss } from "./pairwise-loss.js";
import { PreferenceTrainer, type ScoredSequence } from "./preference.js";

/**
 * Direct preference optimisation (Rafailov et al., 2023) on chosen/rejected pairs: the loss of a
 * pair is −log σ(β·((lp_c − ref_c) − (lp_r − ref_r))), where lp is the policy's logprob of a
 * response summed over its tokens (the trajectory's loss-mask tokens) and ref the reference
 * model's. β is `trainer.dpo.beta`; the reference is the sampler of `trainer.dpo.reference`, or a
 * frozen copy of the weights training started from. Metrics: `dpo/loss`, `dpo/margin`,
 * `dpo/accuracy`, `dpo/chosen_reward`, `dpo/rejected_reward` (β × log-ratio) and `dpo/num_pairs`
 * (see {@link pairwiseLogisticLoss}), measured on the step's pairs before its update.
 */
export class DpoTrainer extends PreferenceTrainer {
  private reference: Promise<SamplingClient> | undefined;

  /** β, from `trainer.dpo.beta` (default 0.1). */
  get beta(): number {
    return this.context.settings.dpo.beta;
  }

  /** The response: the trajectory's loss-mask tokens. */
  protected scoredSequence(trajectory: Trajectory): ScoredSequence {
    return { tokens: trajectory.tokens, scored: trajectory.lossMask };
  }

  /** The DPO loss with the recipe's β. */
  protected pairLoss(): CustomLossFn {
    return pairwiseLogisticLoss({ beta: this.beta, metricPrefix: "dpo" });
  }

  /** The reference model's logprobs of each sequence, from its sampler. */
  protected override async referenceLogprobs(sequences: readonly ScoredSequence[]): Promise<number[][]> {
    this.reference ??= this.context.service.createSamplingClient(
      this.context.settings.dpo.reference ?? this.context.initialSamplerPath,
    );
    const sampler = await this.reference;
    return Promise.all(sequences.map(async (s) => (await sampler.computeLogprobs(s.tokens)).map((lp) => lp ?? 0)));
  }
}
