/**
 * Trajectories to training datums, token in and token out.
 * @module
 */
import { getLossFunction, type LossBackend, type LossFunctionName } from "../../types/losses.js";
import type { Trajectory } from "../../types/trajectory.js";
import { datum, type Datum } from "../../types/wire.js";
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
  const mask = t.lossMask.slice(1);
  const targets = t.tokens.slice(1);
  const inputs = t.tokens.slice(0, n);
  const where = `trajectory (group ${t.groupId ?? "?"}, run ${t.runId ?? "?"})`;
  if (lossKind(options.lossFn) === "supervised") {
    const total = mask.reduce((a, b) => a + b, 0);
    if (total === 0) return undefined;
    const scale = options.reduction === "mean" ? 1 / total : 1;
    return datum(inputs, { target_tokens: targets, weights: mask.map((m) => m * scale) });
  }
  if (t.logprobs === undefined) throw new TrainerError(`${where} has no logprobs, which ${options.lossFn} needs; fill them before building datums`);
  if (t.advantages === undefined && t.advantage === undefined) {
    throw new TrainerError(`${where} has neither advantage nor advantages; prepareTrajectories must set one for ${options.lossFn}`);
  }
  const advantages = mask.map((m, j) => (m === 0 ? 0 : (t.advantages?.[j + 1] ?? t.advantage!)));
  if (advantages.every((a) => a === 0)) return undefined;
  const lossFnInputs: Record<string, number[]> = { target_tokens: targets, logprobs: t.logprobs.slice(1), advantages };
  if (options.backend === "weaver") lossFnInputs.loss_mask = mask;
  return datum(inputs, lossFnInputs);
}
