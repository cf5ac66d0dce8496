/**
 * Per-token advantage shaping: the KL penalty against a reference policy and on-policy
 * distillation from a teacher, both applied through the advantages so any policy loss works.
 * @module
 */

/** Σ_{k≥t} γ^{k−t} x_k for every t (γ = 0 returns a copy). */
export function discountedFutureSum(values: readonly number[], gamma: number): number[] {
  if (gamma === 0) return [...values];
  const out = new Array<number>(values.length).fill(0);
  let acc = 0;
  for (let t = values.length - 1; t >= 0; t--) {
    acc = values[t]! + gamma * acc;
    out[t] = acc;
  }
  return out;
}

/** What {@link klPenaltyAdvantages} returns. */
export interface KlPenaltyResult {
  /** Per-token advantages of each trajectory. */
  advantages: number[][];
  /** d̄: mean of q − b over the batch's trained tokens (`train/kl_policy_reference`). */
  meanKl: number;
}

/** What {@link distillationAdvantages} returns. */
export interface DistillationResult {
  /** Per-token advantages. */
  advantages: number[];
  /** Mean reverse KL over the trained tokens the teacher scored. */
  reverseKl: number;
  /** Trained tokens the teacher scored. */
  tokens: number;
}

/** Inputs of {@link klPenaltyAdvantages} for one trajectory (arrays as long as its tokens). */
export interface KlPenaltyInput {
  /** 0/1 loss mask. */
  lossMask: readonly number[];
  /** Sampler logprob of each token. */
  logprobs: readonly number[];
  /** Reference logprob of each token (index 0, which has none, is ignored). */
  referenceLogprobs: ReadonlyArray<number | null>;
  /** The trajectory's advantage on every trained token (before the penalty). */
  advantage: number;
}

/**
 * Per-token advantages with a KL penalty against a reference policy (the tinker-cookbook
 * method): d_t = q_t − b_t on trained tokens, d̄ = Σd / Σmask over the whole batch, and
 * A_t = A + coef·(d̄ − d_t) (with d first replaced by its discounted future sum when
 * `discount` > 0). Tokens outside the loss mask get 0. Returns the advantages and d̄.
 */
export function klPenaltyAdvantages(batch: readonly KlPenaltyInput[], coef: number, discount = 0): KlPenaltyResult {
  let sum = 0;
  let count = 0;
  const diffs = batch.map(({ lossMask, logprobs, referenceLogprobs }) =>
    lossMask.map((m, t) => {
      if (m === 0 || t === 0) return 0;
      const d = logprobs[t]! - (referenceLogprobs[t] ?? logprobs[t]!);
      sum += d;
      count++;
      return d;
    }),
  );
  const meanKl = count === 0 ? 0 : sum / count;
  const advantages = batch.map(({ lossMask, advantage }, i) => {
    const d = discountedFutureSum(diffs[i]!, discount);
    return lossMask.map((m, t) => (m === 0 || t === 0 ? 0 : advantage + coef * (meanKl - d[t]!)));
  });
  return { advantages, meanKl };
}

/**
 * Per-token advantages of on-policy distillation: the reverse KL r_t = q_t − p_t between the
 * student's sampler logprob q and the teacher's p on trained tokens, A_t = −coef·r_t, then the
 * discounted future sum when `discount` > 0; tokens outside the loss mask get 0. Returns the
 * advantages and the mean reverse KL over trained tokens.
 */
export function distillationAdvantages(
  lossMask: readonly number[],
  studentLogprobs: readonly number[],
  teacherLogprobs: ReadonlyArray<number | null>,
  coef: number,
  discount = 0,
): DistillationResult {
  let sum = 0;
  let tokens = 0;
  const raw = lossMask.map((m, t) => {
    const teacher = teacherLogprobs[t];
    if (m === 0 || t === 0 || teacher === null || teacher === undefined) return 0;
    const r = studentLogprobs[t]! - teacher;
    sum += r;
    tokens++;
    return -coef * r;
  });
  const shaped = discountedFutureSum(raw, discount);
  return {
    advantages: shaped.map((a, t) => (lossMask[t] === 0 || t === 0 ? 0 : a)),
    reverseKl: tokens === 0 ? 0 : sum / tokens,
    tokens,
  };
}
