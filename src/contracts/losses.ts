/**
 * The loss-function contracts: the name of each loss of the training services, what it reads
 * (`loss_fn_inputs`), its configuration defaults and its formula. The reference maths behind
 * `evaluate` (shared by the engine, the server and the tests) is in `wire/loss-math.ts`; the
 * checks a datum passes before it is sent are in `loss-validation.ts`.
 *
 * Notation per datum of N positions: `lp_t` is the model's logprob of `target_tokens[t]`,
 * `q_t` the sampler logprob (`logprobs` input), `A_t` the advantage, `r_t = exp(lp_t − q_t)`.
 * Every loss is **summed** over tokens (and over datums); normalisation belongs in the weights or
 * advantages the trainer builds.
 *
 * @module
 */
import {
  cispoTerm,
  crossEntropyTerm,
  droTerm,
  importanceSamplingTerm,
  perTokenLoss,
  ppoTerm,
  type LossEvaluation,
  type LossInputSpec,
  type LossInputValues,
  type LossTerm,
} from "../wire/loss-math.js";
import { InputError } from "../errors.js";

/** The losses with a documented formula, implemented by Tinker and by the local engine. */
export type BuiltinLossName = "cross_entropy" | "importance_sampling" | "ppo" | "cispo" | "dro";
/** Losses that only Weaver offers and whose exact formula the server defines. */
export type ServerDefinedLossName = "truncated_importance_sampling" | "forward_logprob" | "surrogate";
/** Any loss name a training service accepts. */
export type LossFunctionName = BuiltinLossName | ServerDefinedLossName;
/** The training-service backends whose input rules differ. */
export type LossBackend = "tinker" | "weaver" | "local";

/** Contract of a loss with a documented formula. */
export interface BuiltinLossContract {
  /** The loss name sent as `loss_fn`. */
  readonly name: BuiltinLossName;
  /** False: the formula is documented and implemented here. */
  readonly serverDefined: false;
  /** Backends that accept this loss. */
  readonly backends: readonly LossBackend[];
  /** Required `loss_fn_inputs`, each of length N. */
  readonly inputs: Readonly<Record<string, LossInputSpec>>;
  /** `loss_fn_config` keys with their defaults. */
  readonly config: Readonly<Record<string, number>>;
  /** The formula, in the notation of this module. */
  readonly formula: string;
  /**
   * Reference implementation for one datum.
   * @param targetLogprobs lp_t for each position.
   * @param inputs the datum's loss inputs as plain arrays (only the required ones are read).
   * @param config overrides of {@link BuiltinLossContract.config}.
   */
  evaluate(
    targetLogprobs: ArrayLike<number>,
    inputs: LossInputValues,
    config?: Readonly<Record<string, number>>,
  ): LossEvaluation;
}

/** Contract of a Weaver-only loss: known inputs, formula defined by the server. */
export interface ServerDefinedLossContract {
  /** The loss name sent as `loss_fn`. */
  readonly name: ServerDefinedLossName;
  /** True: no reference implementation; the server decides the formula. */
  readonly serverDefined: true;
  /** Backends that accept this loss. */
  readonly backends: readonly LossBackend[];
  /** The inputs known to be sent with it. */
  readonly inputs: Readonly<Record<string, LossInputSpec>>;
  /** Known `loss_fn_config` keys with the values clients send. */
  readonly config: Readonly<Record<string, number>>;
  /** What is known about it. */
  readonly description: string;
}

/** The contract of any loss. */
export type LossFunctionContract = BuiltinLossContract | ServerDefinedLossContract;

const TARGET_TOKENS: LossInputSpec = {
  dtype: "int64",
  description: "the token to predict at each position (the input shifted by one)",
};
const SAMPLER_LOGPROBS: LossInputSpec = {
  dtype: "float32",
  description: "q_t: logprob of the target token under the sampling policy",
};
const ADVANTAGES: LossInputSpec = {
  dtype: "float32",
  description: "A_t: advantage of each position; 0 on prompt and observation tokens",
};
const RL_INPUTS = { target_tokens: TARGET_TOKENS, logprobs: SAMPLER_LOGPROBS, advantages: ADVANTAGES };
/** `loss_mask`, which Weaver's losses read and Tinker rejects. */
export const LOSS_MASK: LossInputSpec = {
  dtype: "float32",
  description: "1 on trained positions, 0 elsewhere (Weaver only)",
};

const crossEntropyInputs = {
  target_tokens: TARGET_TOKENS,
  weights: { dtype: "float32", description: "w_t: weight of each position's loss; 0 on the prompt" },
} satisfies Record<string, LossInputSpec>;

/** A loss with a documented formula, its reference implementation built from its per-token term. */
function builtin(
  name: BuiltinLossName,
  backends: readonly LossBackend[],
  inputs: Readonly<Record<string, LossInputSpec>>,
  config: Readonly<Record<string, number>>,
  formula: string,
  term: LossTerm,
): BuiltinLossContract {
  return {
    name,
    serverDefined: false,
    backends,
    inputs,
    config,
    formula,
    evaluate: perTokenLoss(name, inputs, config, term),
  };
}

/**
 * `cross_entropy`: L = −Σ_t w_t·lp_t, so dL/dlp_t = −w_t. Supervised fine-tuning; also the
 * building block of client-side custom losses (weights = −dLoss/dlp).
 */
const crossEntropy = builtin(
  "cross_entropy",
  ["tinker", "weaver", "local"],
  crossEntropyInputs,
  {},
  "L = −Σ_t w_t·lp_t",
  crossEntropyTerm,
);

/** `importance_sampling`: L = −Σ_t r_t·A_t, so dL/dlp_t = −r_t·A_t. */
const importanceSampling = builtin(
  "importance_sampling",
  ["tinker", "weaver", "local"],
  RL_INPUTS,
  {},
  "L = −Σ_t r_t·A_t,  r_t = exp(lp_t − q_t)",
  importanceSamplingTerm,
);

/**
 * `ppo`: L = −Σ_t min(r_t·A_t, clip(r_t, lo, hi)·A_t). The gradient is −r_t·A_t where the
 * unclipped term is the minimum, and 0 where the clipped term wins. Thresholds bound the ratio
 * (`clip_low_threshold`, `clip_high_threshold`: defaults 0.8 and 1.2, i.e. ε = 0.2).
 */
const ppo = builtin(
  "ppo",
  ["tinker", "local"],
  RL_INPUTS,
  { clip_low_threshold: 0.8, clip_high_threshold: 1.2 },
  "L = −Σ_t min(r_t·A_t, clip(r_t, lo, hi)·A_t)",
  ppoTerm,
);

/**
 * `cispo`: L = −Σ_t sg[clip(r_t, lo, hi)]·lp_t·A_t, with sg the stop-gradient, so
 * dL/dlp_t = −clip(r_t, lo, hi)·A_t: the clipped ratio weights the gradient but is not
 * differentiated. Defaults lo = 0, hi = 4.
 */
const cispo = builtin(
  "cispo",
  ["tinker", "local"],
  RL_INPUTS,
  { clip_low_threshold: 0, clip_high_threshold: 4 },
  "L = −Σ_t sg[clip(r_t, lo, hi)]·lp_t·A_t",
  cispoTerm,
);

/**
 * `dro`: L = −Σ_t [lp_t·A_t − ½β(lp_t − q_t)²], so dL/dlp_t = −A_t + β(lp_t − q_t). The
 * default β = 0.05 is the documentation's example (the services document no default).
 */
const dro = builtin(
  "dro",
  ["tinker", "local"],
  RL_INPUTS,
  { beta: 0.05 },
  "L = −Σ_t [lp_t·A_t − ½β(lp_t − q_t)²]",
  droTerm,
);

const weaverOnly = (
  name: ServerDefinedLossName,
  inputs: Record<string, LossInputSpec>,
  description: string,
): ServerDefinedLossContract => ({
  name,
  serverDefined: true,
  backends: ["weaver"],
  inputs,
  config: {},
  description,
});

/**
 * Every loss a training service accepts, by name. Built-in losses carry a reference
 * implementation (`evaluate`); Weaver-only losses are listed with their known inputs and
 * `serverDefined: true`.
 *
 * @example
 * ```ts
 * const { loss, gradLogprobs } = lossFunctions.ppo.evaluate(lp, { target_tokens, logprobs, advantages });
 * ```
 */
export const lossFunctions = {
  /** SFT: L = −Σ w_t·lp_t. */
  cross_entropy: crossEntropy,
  /** Policy gradient with importance weights: L = −Σ r_t·A_t. */
  importance_sampling: importanceSampling,
  /** Clipped-ratio PPO objective (ratio bounds 0.8 / 1.2 by default). */
  ppo,
  /** Clipped importance-sampling policy optimisation with a stop-gradient weight (bounds 0 / 4). */
  cispo,
  /** Direct reward optimisation with a quadratic penalty (β = 0.05 by default). */
  dro,
  /** Weaver only; formula defined by the server. */
  truncated_importance_sampling: weaverOnly(
    "truncated_importance_sampling",
    { ...RL_INPUTS, loss_mask: LOSS_MASK },
    "Importance sampling with a truncated ratio; the cap and the reduction are defined by the Weaver server.",
  ),
  /** Weaver only; forward pass returning target logprobs. */
  forward_logprob: weaverOnly(
    "forward_logprob",
    { target_tokens: TARGET_TOKENS },
    "Forward-only pass returning target logprobs; the first half of Weaver's client-side custom loss.",
  ),
  /** Weaver only; linear surrogate for client-side custom losses. */
  surrogate: weaverOnly(
    "surrogate",
    {
      target_tokens: TARGET_TOKENS,
      surrogate_weights: { dtype: "float32", description: "+dLoss/dlp_t from a client-side custom loss" },
    },
    "Linear surrogate whose gradient is the given per-token weights; the second half of Weaver's custom loss.",
  ),
} as const satisfies Record<LossFunctionName, LossFunctionContract>;

/** Names of all known losses. */
export const LOSS_FUNCTION_NAMES = Object.keys(lossFunctions) as LossFunctionName[];

/** Looks up a loss contract by name. @throws {@link "nexrl/errors".InputError | InputError} for an unknown name. */
export function getLossFunction(name: string): LossFunctionContract {
  if (!Object.hasOwn(lossFunctions, name)) {
    throw new InputError(`unknown loss function "${name}"; known: ${LOSS_FUNCTION_NAMES.join(", ")}`);
  }
  return lossFunctions[name as LossFunctionName];
}
