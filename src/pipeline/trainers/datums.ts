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
 * advantage 0 wherever the loss mask is 0.
 * @throws {@link TrainerError} naming the trajectory when a policy loss lacks logprobs or advantages.
 */
export function trajectoryToDatum(t: Trajectory, options: DatumOptions): Datum | undefined {
  const n = t.tokens.length - 1;
  if (n < 1) return undefined;
  const where = `trajectory (group ${t.groupId ?? "?"}, run ${t.runId ?? "?"})`;
  // This runs over every token of every batch: each tensor starts as a slice (one packed array
  // of the right length) and is filled in place, without per-token callbacks or array growth.
  const mask = t.lossMask.slice(1);
  if (lossKind(options.lossFn) === "supervised") {
    let total = 0;
    for (let j = 0; j < n; j++) total += mask[j]!;
    if (total === 0) return undefined;
    if (options.reduction === "mean") for (let j = 0; j < n; j++) mask[j]! /= total;
    return ownedDatum(t.tokens, { target_tokens: t.tokens.slice(1), weights: mask });
  }
  if (t.logprobs === undefined) throw new TrainerError(`${where} has no logprobs, which ${options.lossFn} needs; fill them before building datums`);
  if (t.advantages === undefined && t.advantage === undefined) {
    throw new TrainerError(`${where} has neither advantage nor advantages; prepareTrajectories must set one for ${options.lossFn}`);
  }
  const advantages = options.backend === "weaver" ? mask.slice() : mask;
  let signal = false;
  for (let j = 0; j < n; j++) {
    if (advantages[j] === 0) continue;
    const a = t.advantages?.[j + 1] ?? t.advantage!;
    advantages[j] = a;
    if (a !== 0) signal = true;
  }
  if (!signal) return undefined;
  const lossFnInputs: Record<string, number[]> = { target_tokens: t.tokens.slice(1), logprobs: t.logprobs.slice(1), advantages };
  if (options.backend === "weaver") lossFnInputs.loss_mask = mask;
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
