/**
 * Loss-function contracts: what each loss of the training services reads, its configuration
 * defaults, its formula, and one reference implementation shared by the engine, the server and
 * the tests.
 *
 * Notation per datum of N positions: `lp_t` is the model's logprob of `target_tokens[t]`,
 * `q_t` the sampler logprob (`logprobs` input), `A_t` the advantage, `r_t = exp(lp_t − q_t)`.
 * Every loss is **summed** over tokens (and over datums); normalisation belongs in the weights or
 * advantages the trainer builds.
 *
 * @module
 */
import { modelInputLength, tensorSize, tensorValues, type Datum, type TensorDtype } from "./wire.js";
import { InputError } from "../errors.js";

/** The losses with a documented formula, implemented by Tinker and by the local engine. */
export type BuiltinLossName = "cross_entropy" | "importance_sampling" | "ppo" | "cispo" | "dro";
/** Losses that only Weaver offers and whose exact formula the server defines. */
export type ServerDefinedLossName = "truncated_importance_sampling" | "forward_logprob" | "surrogate";
/** Any loss name a training service accepts. */
export type LossFunctionName = BuiltinLossName | ServerDefinedLossName;
/** The training-service backends whose input rules differ. */
export type LossBackend = "tinker" | "weaver" | "local";

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
const LOSS_MASK: LossInputSpec = { dtype: "float32", description: "1 on trained positions, 0 elsewhere (Weaver only)" };

function resolveConfig(
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

function readInputs(
  name: string,
  spec: Readonly<Record<string, LossInputSpec>>,
  lp: ArrayLike<number>,
  inputs: LossInputValues,
): Record<string, ArrayLike<number>> {
  for (const key of Object.keys(spec)) {
    const values = inputs[key];
    if (values === undefined) throw new InputError(`${name} needs loss input "${key}" (${spec[key]!.description})`);
    if (values.length !== lp.length) {
      throw new InputError(
        `${name}: loss input "${key}" has length ${values.length} but the datum has ${lp.length} positions`,
      );
    }
  }
  return inputs;
}

/** Builds a reference implementation from the per-token loss and its derivative in lp_t. */
function perTokenLoss(
  name: BuiltinLossName,
  spec: Readonly<Record<string, LossInputSpec>>,
  defaults: Readonly<Record<string, number>>,
  term: (
    lp: number,
    t: number,
    inputs: Record<string, ArrayLike<number>>,
    config: Record<string, number>,
  ) => [loss: number, grad: number],
): BuiltinLossContract["evaluate"] {
  return (targetLogprobs, inputs, config) => {
    const cfg = resolveConfig(name, defaults, config);
    const values = readInputs(name, spec, targetLogprobs, inputs);
    const n = targetLogprobs.length;
    const gradLogprobs = new Float64Array(n);
    let loss = 0;
    for (let t = 0; t < n; t++) {
      const [l, g] = term(targetLogprobs[t]!, t, values, cfg);
      loss += l;
      gradLogprobs[t] = g;
    }
    return { loss, gradLogprobs, metrics: { "loss:sum": loss } };
  };
}

const at = (inputs: Record<string, ArrayLike<number>>, key: string, t: number): number => inputs[key]![t]!;
const clamp = (x: number, lo: number, hi: number): number => Math.min(Math.max(x, lo), hi);

const crossEntropyInputs = {
  target_tokens: TARGET_TOKENS,
  weights: { dtype: "float32", description: "w_t: weight of each position's loss; 0 on the prompt" },
} satisfies Record<string, LossInputSpec>;

/**
 * `cross_entropy`: L = −Σ_t w_t·lp_t, so dL/dlp_t = −w_t. Supervised fine-tuning; also the
 * building block of client-side custom losses (weights = −dLoss/dlp).
 */
const crossEntropy: BuiltinLossContract = {
  name: "cross_entropy",
  serverDefined: false,
  backends: ["tinker", "weaver", "local"],
  inputs: crossEntropyInputs,
  config: {},
  formula: "L = −Σ_t w_t·lp_t",
  evaluate: perTokenLoss("cross_entropy", crossEntropyInputs, {}, (lp, t, x) => {
    const w = at(x, "weights", t);
    return [-w * lp, -w];
  }),
};

/** `importance_sampling`: L = −Σ_t r_t·A_t, so dL/dlp_t = −r_t·A_t. */
const importanceSampling: BuiltinLossContract = {
  name: "importance_sampling",
  serverDefined: false,
  backends: ["tinker", "weaver", "local"],
  inputs: RL_INPUTS,
  config: {},
  formula: "L = −Σ_t r_t·A_t,  r_t = exp(lp_t − q_t)",
  evaluate: perTokenLoss("importance_sampling", RL_INPUTS, {}, (lp, t, x) => {
    const a = at(x, "advantages", t);
    const r = Math.exp(lp - at(x, "logprobs", t));
    return [-r * a, -r * a];
  }),
};

const ppoDefaults = { clip_low_threshold: 0.8, clip_high_threshold: 1.2 };

/**
 * `ppo`: L = −Σ_t min(r_t·A_t, clip(r_t, lo, hi)·A_t). The gradient is −r_t·A_t where the
 * unclipped term is the minimum, and 0 where the clipped term wins. Thresholds bound the ratio
 * (defaults 0.8 and 1.2, i.e. ε = 0.2).
 */
const ppo: BuiltinLossContract = {
  name: "ppo",
  serverDefined: false,
  backends: ["tinker", "local"],
  inputs: RL_INPUTS,
  config: ppoDefaults,
  formula: "L = −Σ_t min(r_t·A_t, clip(r_t, lo, hi)·A_t)",
  evaluate: perTokenLoss("ppo", RL_INPUTS, ppoDefaults, (lp, t, x, c) => {
    const a = at(x, "advantages", t);
    const r = Math.exp(lp - at(x, "logprobs", t));
    const unclipped = r * a;
    const clipped = clamp(r, c.clip_low_threshold!, c.clip_high_threshold!) * a;
    return unclipped <= clipped ? [-unclipped, -unclipped] : [-clipped, 0];
  }),
};

const cispoDefaults = { clip_low_threshold: 0, clip_high_threshold: 4 };

/**
 * `cispo`: L = −Σ_t sg[clip(r_t, lo, hi)]·lp_t·A_t, with sg the stop-gradient, so
 * dL/dlp_t = −clip(r_t, lo, hi)·A_t: the clipped ratio weights the gradient but is not
 * differentiated. Defaults lo = 0, hi = 4.
 */
const cispo: BuiltinLossContract = {
  name: "cispo",
  serverDefined: false,
  backends: ["tinker", "local"],
  inputs: RL_INPUTS,
  config: cispoDefaults,
  formula: "L = −Σ_t sg[clip(r_t, lo, hi)]·lp_t·A_t",
  evaluate: perTokenLoss("cispo", RL_INPUTS, cispoDefaults, (lp, t, x, c) => {
    const a = at(x, "advantages", t);
    const w = clamp(Math.exp(lp - at(x, "logprobs", t)), c.clip_low_threshold!, c.clip_high_threshold!);
    return [-w * lp * a, -w * a];
  }),
};

const droDefaults = { beta: 0.05 };

/**
 * `dro`: L = −Σ_t [lp_t·A_t − ½β(lp_t − q_t)²], so dL/dlp_t = −A_t + β(lp_t − q_t). The
 * default β = 0.05 is the documentation's example (the services document no default).
 */
const dro: BuiltinLossContract = {
  name: "dro",
  serverDefined: false,
  backends: ["tinker", "local"],
  inputs: RL_INPUTS,
  config: droDefaults,
  formula: "L = −Σ_t [lp_t·A_t − ½β(lp_t − q_t)²]",
  evaluate: perTokenLoss("dro", RL_INPUTS, droDefaults, (lp, t, x, c) => {
    const a = at(x, "advantages", t);
    const d = lp - at(x, "logprobs", t);
    const beta = c.beta!;
    return [-(lp * a - 0.5 * beta * d * d), -a + beta * d];
  }),
};

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

/** Looks up a loss contract by name. @throws {@link InputError} for an unknown name. */
export function getLossFunction(name: string): LossFunctionContract {
  if (!Object.hasOwn(lossFunctions, name)) {
    throw new InputError(`unknown loss function "${name}"; known: ${LOSS_FUNCTION_NAMES.join(", ")}`);
  }
  return lossFunctions[name as LossFunctionName];
}

/** Inputs a backend requires beyond the contract's own. */
const EXTRA_REQUIRED: Partial<Record<LossBackend, Partial<Record<LossFunctionName, Record<string, LossInputSpec>>>>> = {
  // Weaver's importance_sampling masks explicitly instead of through zero advantages.
  weaver: { importance_sampling: { loss_mask: LOSS_MASK } },
};

/** Throws unless every value of loss input `key` is finite. */
function checkFinite(where: string, key: string, values: readonly number[]): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isFinite(v)) throw new InputError(`${where}: loss input "${key}"[${i}] is ${v}; values must be finite`);
  }
}

/** Throws unless every value of `target_tokens` is a token id (or, on Weaver, -100 for an ignored position). */
function checkTokenIds(where: string, values: readonly number[], weaver: boolean): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(Number.isInteger(v) && (v >= 0 || (weaver && v === -100)))) {
      throw new InputError(
        `${where}: ${Number.isFinite(v) ? `target_tokens[${i}] is ${v}; expected a non-negative token id${weaver ? " or -100 (ignored)" : ""}` : `loss input "target_tokens"[${i}] is ${v}; values must be finite`}`,
      );
    }
  }
}

/** Options of {@link validateLossInputs}. */
export interface ValidateLossInputsOptions {
  /** The backend the datum is going to; its rules on extra and missing keys apply. */
  backend: LossBackend;
  /** The `loss_fn_config` that will be sent; unknown keys are reported. */
  config?: Readonly<Record<string, number>>;
}

/**
 * Checks that `datum` satisfies loss `lossFn` on `backend`: the loss exists there, every required
 * input is present with the right dtype and one value per position, values are finite and
 * target tokens are valid ids, and no key is present that the backend rejects (Tinker and the
 * local engine reject any key outside the contract, `mask` and `loss_mask` included; Weaver's
 * `importance_sampling` requires `loss_mask`).
 * @throws {@link InputError} with a message naming the loss, the backend and the key.
 */
export function validateLossInputs(lossFn: string, datum: Datum, options: ValidateLossInputsOptions): void {
  const { backend } = options;
  const contract = getLossFunction(lossFn);
  const where = `${lossFn} on ${backend}`;
  if (!contract.backends.includes(backend)) {
    throw new InputError(
      `${where}: this backend does not offer ${lossFn}; it is offered by ${contract.backends.join(", ")}`,
    );
  }
  const required: Record<string, LossInputSpec> = { ...contract.inputs, ...EXTRA_REQUIRED[backend]?.[contract.name] };
  const n = modelInputLength(datum.model_input);
  for (const [key, spec] of Object.entries(required)) {
    const tensor = datum.loss_fn_inputs[key];
    if (!tensor) throw new InputError(`${where}: missing loss input "${key}" (${spec.dtype}: ${spec.description})`);
    if (tensor.dtype !== spec.dtype)
      throw new InputError(`${where}: loss input "${key}" has dtype ${tensor.dtype}, expected ${spec.dtype}`);
  }
  for (const [key, tensor] of Object.entries(datum.loss_fn_inputs)) {
    if (!(key in required) && !contract.serverDefined && backend !== "weaver") {
      const hint = key === "mask" || key === "loss_mask" ? "; mask through zero advantages or weights instead" : "";
      throw new InputError(
        `${where}: loss input "${key}" is rejected by ${backend}, which accepts only ${Object.keys(required).join(", ")}${hint}`,
      );
    }
    const size = tensorSize(tensor);
    if (size !== n)
      throw new InputError(`${where}: loss input "${key}" has ${size} values but the model input has ${n} positions`);
    const values = tensorValues(tensor);
    if (key === "target_tokens") checkTokenIds(where, values, backend === "weaver");
    else checkFinite(where, key, values);
  }
  if (options.config && !contract.serverDefined) resolveConfig(where, contract.config, options.config);
}
