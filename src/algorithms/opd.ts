/**
 * The `remote_api_opd` trainer: on-policy distillation from a teacher.
 * @module
 */
import type { SamplingClient } from "../contracts/training.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { BaseTrainer } from "./base-trainer.js";
import { distillationAdvantages } from "./token-advantages.js";
import { InputError } from "../errors.js";

/**
 * On-policy distillation: the student samples, the teacher (`trainer.teachers[0]`, its
 * `checkpoint` sampler path or else its `base_model`) scores every token, and each trained
 * token's advantage is −`kl_penalty_coef` × (student logprob − teacher logprob), discounted over
 * the future tokens by `kl_discount_factor`. Reports `opd/teacher_kl` (mean reverse KL per
 * trained token) and `opd/valid_tokens`.
 */
export class OnPolicyDistillationTrainer extends BaseTrainer {
  private teacher: Promise<SamplingClient> | undefined;

  /** True: the reverse KL reads the student's sampler logprobs. */
  protected override needsSamplerLogprobs(): boolean {
    return true;
  }

  /** Sets per-token advantages from the teacher's logprobs. */
  protected async prepareTrajectories(
    trajectories: Trajectory[],
    metrics: Record<string, number>,
  ): Promise<Trajectory[]> {
    const teacher = await this.teacherSampler();
    const teacherLogprobs = await Promise.all(trajectories.map((t) => teacher.computeLogprobs(t.tokens)));
    const { klPenaltyCoef: coef, klDiscountFactor: discount } = this.algorithm;
    let klSum = 0;
    let tokens = 0;
    trajectories.forEach((t, i) => {
      const shaped = distillationAdvantages(t.lossMask, t.logprobs!, teacherLogprobs[i]!, coef, discount);
      t.advantages = shaped.advantages;
      klSum += shaped.reverseKl * shaped.tokens;
      tokens += shaped.tokens;
    });
    metrics["opd/teacher_kl"] = tokens === 0 ? 0 : klSum / tokens;
    metrics["opd/valid_tokens"] = tokens;
    return trajectories;
  }

  private teacherSampler(): Promise<SamplingClient> {
    // The recipe schema refuses a teacher on another service: this one samples on the student's.
    const teacher = this.context.settings.teacher;
    if (!teacher)
      throw new InputError(
        "remote_api_opd needs a teacher: set trainer.teachers: [{base_model: ..., checkpoint: ...}]",
      );
    this.teacher ??= this.context.service.createSamplingClient(teacher.checkpoint ?? teacher.baseModel);
    return this.teacher;
  }
}
