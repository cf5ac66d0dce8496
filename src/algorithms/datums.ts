/**
 * Trajectories to training datums, token in and token out.
 * @module
 */
import { getLossFunction, type LossBackend, type LossFunctionName } from "../contracts/losses.js";
import type { Trajectory } from "../contracts/trajectory.js";
import { dtypeForKey, type Datum } from "../wire/wire.js";
import { InputError } from "../errors.js";

/** What a loss reads from a trajectory: target weights (`supervised`) or logprobs and advantages (`policy`). */
export type LossKind = "supervised" | "policy";

/**
 * The kind of `lossFn`: `supervised` for losses with `weights` (`cross_entropy`), `policy` for
 * losses with `advantages` (`importance_sampling`, `ppo`, `cispo`, `dro`, Weaver's
 * `truncated_importance_sampling`).
 * @throws {@link "nexrl/errors".InputError | InputError} for losses a trainer cannot use (`forward_logprob`, `surrogate`).
 */
export function lossKind(lossFn: LossFunctionName): LossKind {
  const inputs = getLossFunction(lossFn).inputs;
  if ("weights" in inputs) return "supervised";
  if ("advantages" in inputs) return "policy";
  throw new InputError(
    `loss ${lossFn} is one half of a client-side custom loss and cannot be a trainer's loss_fn; use cross_entropy or a policy loss (importance_sampling, ppo, cispo, dro)`,
  );
}

/** Options of {@link trajectoryToDatum}. */
export interface DatumOptions {
  /** The loss the datum is for. */
  lossFn: LossFunctionName;
  /** The backend it is sent to: Tinker and the local engine reject keys outside the loss contract; Weaver's policy losses take `loss_mask`. */
  backend: LossBackend;
  /** Supervised losses: `sum` (weight 1 per trained token, the default) or `mean` (each datum's weights sum to 1). */
  reduction?: "sum" | "mean";
}

/**
 * The datum of one trajectory, or undefined when it carries no training signal (no position
 * with a non-zero weight or advantage).
 *
 * Positions are shifted by one: the model reads `tokens[0..n-2]` and position `j` predicts
 * `tokens[j+1]`; its loss mask, sampler logprob and advantage are those of token `j+1`. Supervised
 * losses get `weights` = the shifted loss mask (divided by its sum for `mean`). Policy losses get
 * `logprobs` and `advantages` (the per-token `advantages`, else the scalar `advantage`), with
 * advantage 0 wherever the loss mask is 0. Both are multiplied by the trajectory's `lossWeight` when
 * it has one.
 *
 * The datum's arrays are new arrays: changing the trajectory afterwards does not change the datum.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the trajectory when a policy loss lacks logprobs or
 *   advantages, or when `lossMask`, `logprobs` or `advantages` is not an array with one value per token.
 */
export function trajectoryToDatum(t: Trajectory, options: DatumOptions): Datum | undefined {
  const { tokens, lossMask } = t;
  if (tokens.length < 2) return undefined;
  const where = `trajectory (group ${t.groupId ?? "?"}, run ${t.runId ?? "?"})`;
  // Checked again here: prepareTrajectories may have set it after the rollout's validate().
  const weight = t.lossWeight ?? 1;
  if (typeof weight !== "number" || !Number.isFinite(weight) || weight < 0)
    throw new InputError(
      `${where} has lossWeight ${JSON.stringify(weight)}; it must be a finite number >= 0 (or absent for 1)`,
    );
  if (lossKind(options.lossFn) === "supervised") {
    perToken(where, { tokens, lossMask });
    const targetMask = lossMask.slice(1);
    const total = targetMask.reduce((sum, m) => sum + m, 0);
    if (total === 0) return undefined;
    const scale = (options.reduction === "mean" ? 1 / total : 1) * weight;
    return shiftedDatum(tokens, { target_tokens: tokens.slice(1), weights: targetMask.map((m) => m * scale) });
  }
  const { logprobs, advantages, advantage } = t;
  if (logprobs === undefined)
    throw new InputError(`${where} has no logprobs, which ${options.lossFn} needs; fill them before building datums`);
  if (advantages === undefined && advantage === undefined) {
    throw new InputError(
      `${where} has neither advantage nor advantages; prepareTrajectories must set one for ${options.lossFn}`,
    );
  }
  perToken(where, { tokens, lossMask, logprobs, ...(advantages !== undefined && { advantages }) });
  // Position j trains token j + 1: its advantage, or 0 where the loss mask leaves the token out.
  const shiftedAdvantages = lossMask
    .slice(1)
    .map((m, j) => (m === 0 ? 0 : (advantages?.[j + 1] ?? advantage!) * weight));
  if (shiftedAdvantages.every((a) => a === 0)) return undefined;
  return shiftedDatum(tokens, {
    target_tokens: tokens.slice(1),
    logprobs: logprobs.slice(1),
    advantages: shiftedAdvantages,
    ...(options.backend === "weaver" && { loss_mask: lossMask.slice(1) }),
  });
}

/**
 * Checks that each of `arrays` is an array with one value per token.
 * @throws {@link "nexrl/errors".InputError | InputError} naming the trajectory and the field.
 */
function perToken(where: string, arrays: { tokens: readonly number[] } & Record<string, readonly number[]>): void {
  const length = arrays.tokens.length;
  for (const [field, values] of Object.entries(arrays)) {
    if (!Array.isArray(values))
      throw new InputError(`${where}: ${field} must be an array, got ${Object.prototype.toString.call(values)}`);
    if (values.length !== length)
      throw new InputError(
        `${where} has ${values.length} ${field} values for ${length} tokens; there must be one per token`,
      );
  }
}

/** The datum reading `tokens[0..n-2]` (the model input), with the given loss inputs of n − 1 positions. */
function shiftedDatum(tokens: readonly number[], lossFnInputs: Record<string, number[]>): Datum {
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: tokens.slice(0, -1) }] },
    loss_fn_inputs: Object.fromEntries(
      Object.entries(lossFnInputs).map(([key, data]) => [key, { data, dtype: dtypeForKey(key) }]),
    ),
  };
}
