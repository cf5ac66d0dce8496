/**
 * The reference maths of the built-in losses: each loss as a per-token term (its value and its
 * derivative in lp_t), summed over the datum by {@link perTokenLoss}. The loss contracts
 * (`contracts/losses.ts`) wire these terms into `lossFunctions[name].evaluate`, which the local
 * engine, `nexrl serve` and the tests use, and name the types defined here: what a loss reads
 * ({@link LossInputSpec}, {@link LossInputValues}) and what it returns ({@link LossEvaluation}).
 * Notation as in the contracts: `lp_t` the model's logprob of the target token, `q_t` the
 * sampler's, `A_t` the advantage, `r_t = exp(lp_t − q_t)`.
 * @module
 */
import type { TensorDtype } from "./wire.js";
import { InputError } from "../errors.js";

/** One entry of `loss_fn_inputs`. */
export interface LossInputSpec {
  /** Dtype on the wire. */
  dtype: TensorDtype;
  /** What the values mean. */
  description: string;
}

/** What a reference implementation returns for one datum. */
export interface LossEvaluation {
  /** The loss, summed over the datum's tokens. */
  loss: number;
  /** dL/dlp_t for each position. */
  gradLogprobs: Float64Array;
  /** Metrics by `name:reduction` key; always has `loss:sum`. */
  metrics: Record<string, number>;
}

/** Per-token arrays a reference implementation reads, by `loss_fn_inputs` name. */
export type LossInputValues = Record<string, ArrayLike<number>>;

/**
 * One loss's per-token term at position `t`: the loss there and its derivative in `lp`.
 * `inputs` are the datum's loss inputs, checked to be present and as long as the datum;
 * `config` is the loss's configuration with defaults filled.
 */
export type LossTerm = (
  lp: number,
  t: number,
  inputs: LossInputValues,
  config: Readonly<Record<string, number>>,
) => [loss: number, grad: number];

/**
 * A loss's `loss_fn_config` with its defaults filled.
 * @throws {@link "nexrl/errors".InputError | InputError} for a key the loss does not use or a value that is not finite.
 */
export function resolveLossConfig(
  name: string,
  defaults: Readonly<Record<string, number>>,
  config: Readonly<Record<string, number>> = {},
): Record<string, number> {
  for (const key of Object.keys(config)) {
    if (!(key in defaults)) {
      const known = Object.keys(defaults);
      throw new InputError(
        `loss_fn_config key "${key}" is not used by ${name}; ${known.length ? `known keys: ${known.join(", ")}` : "it takes no configuration"}`,
      );
    }
  }
  const out = { ...defaults, ...config };
  for (const [key, value] of Object.entries(out)) {
    if (!Number.isFinite(value))
      throw new InputError(`loss_fn_config.${key} of ${name} must be a finite number, got ${value}`);
  }
  return out;
}

/** Checks that every input the loss reads is there, one value per position. */
function checkInputs(
  name: string,
  spec: Readonly<Record<string, LossInputSpec>>,
  lp: ArrayLike<number>,
  inputs: LossInputValues,
): void {
  for (const key of Object.keys(spec)) {
    const values = inputs[key];
    if (values === undefined) throw new InputError(`${name} needs loss input "${key}" (${spec[key]!.description})`);
    if (values.length !== lp.length) {
      throw new InputError(
        `${name}: loss input "${key}" has length ${values.length} but the datum has ${lp.length} positions`,
      );
    }
  }
}

/**
 * The reference implementation of a loss from its per-token term: the loss summed over the
 * datum's positions, the derivative at each, and `loss:sum` as a metric.
 */
export function perTokenLoss(
  name: string,
  spec: Readonly<Record<string, LossInputSpec>>,
  defaults: Readonly<Record<string, number>>,
  term: LossTerm,
): (
  targetLogprobs: ArrayLike<number>,
  inputs: LossInputValues,
  config?: Readonly<Record<string, number>>,
) => LossEvaluation {
  return (targetLogprobs, inputs, config) => {
    const cfg = resolveLossConfig(name, defaults, config);
    checkInputs(name, spec, targetLogprobs, inputs);
    const n = targetLogprobs.length;
    const gradLogprobs = new Float64Array(n);
    let loss = 0;
    for (let t = 0; t < n; t++) {
      const [l, g] = term(targetLogprobs[t]!, t, inputs, cfg);
      loss += l;
      gradLogprobs[t] = g;
    }
    return { loss, gradLogprobs, metrics: { "loss:sum": loss } };
  };
}

const clamp = (x: number, lo: number, hi: number): number => Math.min(Math.max(x, lo), hi);

/** `cross_entropy`: −w_t·lp_t, derivative −w_t. */
export const crossEntropyTerm: LossTerm = (lp, t, x) => {
  const w = x.weights![t]!;
  return [-w * lp, -w];
};

/** What a policy-gradient term reads at one position: lp_t, q_t, A_t and r_t = exp(lp_t − q_t). */
interface PolicyPosition {
  lp: number;
  q: number;
  a: number;
  r: number;
}

/** A policy-gradient term (inputs `logprobs` and `advantages`) from its formula in lp, q, A and r. */
function policyTerm(
  f: (p: PolicyPosition, config: Readonly<Record<string, number>>) => [loss: number, grad: number],
): LossTerm {
  return (lp, t, x, config) => {
    const q = x.logprobs![t]!;
    return f({ lp, q, a: x.advantages![t]!, r: Math.exp(lp - q) }, config);
  };
}

/** `importance_sampling`: −r_t·A_t, derivative −r_t·A_t. */
export const importanceSamplingTerm: LossTerm = policyTerm(({ r, a }) => [-r * a, -r * a]);

/** `ppo`: −min(r_t·A_t, clip(r_t, lo, hi)·A_t); derivative −r_t·A_t where unclipped, else 0. */
export const ppoTerm: LossTerm = policyTerm(({ r, a }, c) => {
  const unclipped = r * a;
  const clipped = clamp(r, c.clip_low_threshold!, c.clip_high_threshold!) * a;
  return unclipped <= clipped ? [-unclipped, -unclipped] : [-clipped, 0];
});

/** `cispo`: −sg[clip(r_t, lo, hi)]·lp_t·A_t, derivative −clip(r_t, lo, hi)·A_t. */
export const cispoTerm: LossTerm = policyTerm(({ lp, r, a }, c) => {
  const w = clamp(r, c.clip_low_threshold!, c.clip_high_threshold!);
  return [-w * lp * a, -w * a];
});

/** `dro`: −[lp_t·A_t − ½β(lp_t − q_t)²], derivative −A_t + β(lp_t − q_t). */
export const droTerm: LossTerm = policyTerm(({ lp, q, a }, c) => {
  const d = lp - q;
  const beta = c.beta!;
  return [-(lp * a - 0.5 * beta * d * d), -a + beta * d];
});
