/**
 * Trajectories to training datums, token in and token out.
 * @module
 */
import { getLossFunction, type LossBackend, type LossFunctionName } from "../../types/losses.js";
import type { Trajectory } from "../../types/trajectory.js";
import { dtypeForKey, type Datum, type TensorData } from "../../types/wire.js";
import { TrainerError } from "../errors.js";

/** What a loss reads from a trajectory: target weights (`supervised`) or logprobs and advantages (`policy`). */
export type LossKind = "supervised" | "policy";

/**
 * The kind of `lossFn`: `supervised` for losses with `weights` (`cross_entropy`), `policy` for
 * losses with `advantages` (`importance_sampling`, `ppo`, `cispo`, `dro`, Weaver's
 * `truncated_importance_sampling`).
 * @throws {@link TrainerError} for losses a trainer cannot use (`forward_logprob`, `surrogate`).
 */
export function lossKind(lossFn: LossFunctionName): LossKind {
  const inputs = getLossFunction(lossFn).inputs;
  if ("weights" in inputs) return "supervised";
  if ("advantages" in inputs) return "policy";
  throw new TrainerError(`loss ${lossFn} is one half of a client-side custom loss and cannot be a trainer's loss_fn; use cross_entropy or a policy loss (importance_sampling, ppo, cispo, dro)`);
}

/**
 * A trajectory's share of the loss: `extraFields.loss_weight` (an agent episode splits its weight
 * over its trajectories), else 1.
 * @throws {@link TrainerError} for a weight that is not a finite number ≥ 0.
 */
function lossWeight(t: Trajectory, where: string): number {
  const weight = t.extraFields.loss_weight;
  if (weight === undefined) return 1;
  if (typeof weight !== "number" || !Number.isFinite(weight) || weight < 0) {
    throw new TrainerError(`${where} has extraFields.loss_weight ${JSON.stringify(weight)}; it must be a finite number >= 0 (or absent for 1)`);
  }
  return weight;
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
 * advantage 0 wherever the loss mask is 0. Both are multiplied by `extraFields.loss_weight` when
 * the trajectory has one.
 * @throws {@link TrainerError} naming the trajectory when a policy loss lacks logprobs or advantages.
 */
export function trajectoryToDatum(t: Trajectory, options: DatumOptions): Datum | undefined {
  const n = t.tokens.length - 1;
  if (n < 1) return undefined;
  const { lossMask } = t;
  const where = `trajectory (group ${t.groupId ?? "?"}, run ${t.runId ?? "?"})`;
  // This runs over every token of every batch. Each tensor is one fresh array made by `slice`
  // (the cheapest way to a packed array of the right length) and filled in place: no per-token
  // callbacks, no growth, no second copy.
  const weight = lossWeight(t, where);
  if (lossKind(options.lossFn) === "supervised") {
    const weights = lossMask.slice(1);
    let total = 0;
    for (let j = 0; j < n; j++) total += weights[j]!;
    if (total === 0) return undefined;
    const scale = (options.reduction === "mean" ? 1 / total : 1) * weight;
    if (scale !== 1) for (let j = 0; j < n; j++) weights[j]! *= scale;
    return ownedDatum(t.tokens, { target_tokens: t.tokens.slice(1), weights });
  }
  if (t.logprobs === undefined) throw new TrainerError(`${where} has no logprobs, which ${options.lossFn} needs; fill them before building datums`);
  if (t.advantages === undefined && t.advantage === undefined) {
    throw new TrainerError(`${where} has neither advantage nor advantages; prepareTrajectories must set one for ${options.lossFn}`);
  }
  // Starts as a copy of the (floating-point) logprobs, every value overwritten: a copy of the
  // integer mask would be converted to doubles at the first advantage, a second copy.
  const advantages = t.logprobs.slice(1);
  let signal = false;
  for (let j = 0; j < n; j++) {
    const a = lossMask[j + 1] === 0 ? 0 : (t.advantages?.[j + 1] ?? t.advantage!) * weight;
    advantages[j] = a;
    if (a !== 0) signal = true;
  }
  if (!signal) return undefined;
  const lossFnInputs: Record<string, number[]> = { target_tokens: t.tokens.slice(1), logprobs: t.logprobs.slice(1), advantages };
  if (options.backend === "weaver") lossFnInputs.loss_mask = lossMask.slice(1);
  return ownedDatum(t.tokens, lossFnInputs);
}

/**
 * The datum reading `tokens[0..n-2]`, over loss-input arrays made for it alone: unlike `datum()`
 * it does not copy them again. Their values come from a trajectory, and every client checks a
 * datum against its loss contract before sending it.
 */
function ownedDatum(tokens: readonly number[], lossFnInputs: Record<string, number[]>): Datum {
  const loss_fn_inputs: Record<string, TensorData> = {};
  for (const [key, data] of Object.entries(lossFnInputs)) loss_fn_inputs[key] = { data, dtype: dtypeForKey(key) };
  return { model_input: { chunks: [{ type: "encoded_text", tokens: tokens.slice(0, -1) }] }, loss_fn_inputs };
}
