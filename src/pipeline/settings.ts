/**
 * The recipe as the running pipeline sees it: typed, camelCase settings built from the parsed
 * recipe in one place. Recipes keep their snake_case YAML keys; TypeScript code reads these.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import type { LossFunctionName } from "../types/losses.js";
import type { AdamParams } from "../types/wire.js";

/**
 * The hyper-parameters every trainer receives, with defaults filled: the {@link AdamParams} of
 * each optimizer step plus the loss and its extras. Built from the recipe's `trainer.algorithm`
 * merged with `service.train_service.config` (the recipe spells them in snake_case).
 */
export interface AlgorithmConfig extends AdamParams {
  /** Loss sent as `loss_fn` (recipe: `loss_fn`). */
  lossFn: LossFunctionName;
  /** Extra `loss_fn_config` entries, sent as they are (recipe: `loss_fn_config`). */
  lossFnConfig: Record<string, number>;
  /** Entropy bonus (recipe: `entropy_coeff`). */
  entropyCoeff: number;
  /** On-policy distillation: weight of the reverse KL (recipe: `kl_penalty_coef`). */
  klPenaltyCoef: number;
  /** On-policy distillation: discount of future advantages (recipe: `kl_discount_factor`). */
  klDiscountFactor: number;
}

/** The {@link AlgorithmConfig} of a parsed recipe. */
export function algorithmConfig(recipe: RecipeConfig): AlgorithmConfig {
  const a = recipe.trainer.algorithm;
  return {
    lossFn: a.loss_fn,
    lossFnConfig: { ...a.loss_fn_config },
    learningRate: a.learning_rate,
    beta1: a.beta1,
    beta2: a.beta2,
    eps: a.eps,
    weightDecay: a.weight_decay,
    gradClipNorm: a.grad_clip_norm,
    entropyCoeff: a.entropy_coeff,
    klPenaltyCoef: a.kl_penalty_coef,
    klDiscountFactor: a.kl_discount_factor,
  };
}
