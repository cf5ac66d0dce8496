/**
 * The `remote_api_grpo` trainer: group-relative policy optimisation.
 * @module
 */
import type { SamplingClient } from "../contracts/training.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { NEXRL_BRAND } from "../brand.js";
import { putSummary } from "./stats.js";
import { groupAdvantages, type GroupAdvantageOptions } from "./advantages.js";
import { BaseTrainer } from "./base-trainer.js";
import type { TrainerContext } from "../contracts/trainer.js";
import type { ClassOptions } from "../contracts/options.js";
import { klPenaltyAdvantages } from "./token-advantages.js";

/** A KL penalty against a reference policy, applied through the advantages. */
export interface KlPenaltyOptions {
  /** Weight of the penalty (tinker-cookbook's `kl_penalty_coef`). */
  coef: number;
  /** Discount of the per-token KL's future sum (default 0: none). */
  discount?: number;
  /** Sampler path of the reference policy (default: the weights training started from). */
  referencePath?: string;
}

/** Options of {@link GrpoTrainer}. */
export interface GrpoTrainerOptions extends GroupAdvantageOptions {
  /** Train on groups whose rewards are all equal (their advantage is 0; default false: dropped). */
  keepConstantRewardGroups?: boolean;
  /** Add a KL penalty against a reference policy (default: none). */
  klPenalty?: KlPenaltyOptions;
}

/**
 * GRPO: advantages relative to each group of rollouts of the same task (see
 * {@link groupAdvantages}), used by the configured policy loss (`importance_sampling`, `ppo`,
 * `cispo` or `dro`, with `trainer.algorithm.loss_fn_config`). Groups with constant rewards carry no
 * signal and are dropped (`train/groups_constant`). With `klPenalty`, per-token advantages also
 * penalise divergence from the reference policy.
 *
 * @example
 * ```ts
 * export class DrGrpoTrainer extends GrpoTrainer {
 *   constructor(context: TrainerContext) {
 *     super(context, { estimator: "dr_grpo", klPenalty: { coef: 0.01 } });
 *   }
 * }
 * ```
 */
export class GrpoTrainer<Options extends object = ClassOptions> extends BaseTrainer<Options> {
  /** Brand by which the run recognises group-relative trainers across copies of nexrl. */
  static override readonly [NEXRL_BRAND]: string = "nexrl.RemoteApiGrpoTrainer";
  /** The estimator, constant-group and KL-penalty options in use (given to the constructor). */
  protected readonly grpoOptions: GrpoTrainerOptions;
  private reference: Promise<SamplingClient> | undefined;

  /**
   * @param context services, recipe and tokenizer.
   * @param options advantage estimator, constant groups and KL penalty.
   */
  constructor(context: TrainerContext, options: GrpoTrainerOptions = {}) {
    super(context);
    this.grpoOptions = options;
  }

  /** True: policy losses and the KL penalty read sampler logprobs. */
  protected override needsSamplerLogprobs(): boolean {
    return this.grpoOptions.klPenalty !== undefined || super.needsSamplerLogprobs();
  }

  /** Sets each trajectory's advantage and drops constant-reward groups; applies the KL penalty. */
  protected async prepareTrajectories(
    trajectories: Trajectory[],
    metrics: Record<string, number>,
  ): Promise<Trajectory[]> {
    const result = groupAdvantages(trajectories, this.grpoOptions);
    metrics["train/groups"] = result.groups;
    metrics["train/groups_constant"] = result.constantGroups;
    putSummary(metrics, "train/group_reward_std", result.groupStd, ["mean"]);
    trajectories.forEach((t, i) => {
      t.advantage = result.advantages[i]!;
    });
    const kept = this.grpoOptions.keepConstantRewardGroups
      ? trajectories
      : trajectories.filter((_, i) => !result.constant[i]);
    putSummary(
      metrics,
      "train/advantage",
      kept.map((t) => t.advantage!),
      ["mean", "std"],
    );
    const kl = this.grpoOptions.klPenalty;
    if (kl && kept.length > 0) {
      const reference = await this.referenceSampler(kl.referencePath ?? this.context.initialSamplerPath);
      const referenceLogprobs = await Promise.all(kept.map((t) => reference.computeLogprobs(t.tokens)));
      const shaped = klPenaltyAdvantages(
        kept.map((t, i) => ({
          lossMask: t.lossMask,
          logprobs: t.logprobs!,
          referenceLogprobs: referenceLogprobs[i]!,
          advantage: t.advantage!,
        })),
        kl.coef,
        kl.discount,
      );
      kept.forEach((t, i) => {
        t.advantages = shaped.advantages[i]!;
      });
      metrics["train/kl_policy_reference"] = shaped.meanKl;
    }
    return kept;
  }

  /** Says when every group had a constant reward (and what it was, when all share one). */
  protected override describeSkippedStep(
    trajectories: readonly Trajectory[],
    prepared: readonly Trajectory[],
    metrics: Readonly<Record<string, number>>,
  ): string {
    const groups = metrics["train/groups"] ?? 0;
    if (groups === 0 || metrics["train/groups_constant"] !== groups)
      return super.describeSkippedStep(trajectories, prepared, metrics);
    const rewards = new Set(trajectories.map((t) => t.reward));
    const shared = rewards.size === 1 ? ` (every rollout got ${[...rewards][0]})` : "";
    return `all ${groups} group${groups === 1 ? "" : "s"} had constant reward${shared}: nothing to learn from`;
  }

  private referenceSampler(path: string): Promise<SamplingClient> {
    this.reference ??= this.context.service.createSamplingClient(path);
    return this.reference;
  }
}
