/**
 * The trainer class a recipe names.
 * @module
 */
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { classOptions } from "../recipe/class-options.js";
import { loadUserClass } from "../recipe/user-module.js";
import type { ClassOptions } from "../contracts/options.js";
import { CrossEntropyTrainer } from "./cross-entropy.js";
import { DpoTrainer } from "./dpo.js";
import { GrpoTrainer } from "./grpo.js";
import { OnPolicyDistillationTrainer } from "./opd.js";
import { BaseTrainer } from "./base-trainer.js";
import { RewardModelTrainer } from "./reward-model.js";
import type { Trainer, TrainerContext } from "../contracts/trainer.js";

/** A concrete trainer class: a {@link BaseTrainer} subclass, or any class implementing `Trainer`. */
export type TrainerClass = new (context: TrainerContext) => Trainer;

/**
 * The class for `trainer.type`: `remote_api_cross_entropy`, `remote_api_grpo`, `remote_api_opd`,
 * `remote_api_dpo`, `remote_api_reward_model`, or `custom` (the recipe's `custom_trainer_class_name` exported by `custom_trainer_module_path`,
 * a subclass of {@link BaseTrainer}, or a class of its own that implements `Trainer`: `train` and `saveSamplerWeights`).
 * @throws RecipeError for a custom class that cannot be loaded.
 */
export async function resolveTrainerClass(
  config: RecipeConfig,
  recipeDir: string,
  recipeFile?: string,
): Promise<TrainerClass> {
  const trainer = config.trainer;
  switch (trainer.type) {
    case "remote_api_cross_entropy":
      return CrossEntropyTrainer;
    case "remote_api_grpo":
      return GrpoTrainer;
    case "remote_api_opd":
      return OnPolicyDistillationTrainer;
    case "remote_api_dpo":
      return DpoTrainer;
    case "remote_api_reward_model":
      return RewardModelTrainer;
    case "custom":
      return (await loadUserClass({
        modulePath: trainer.custom_trainer_module_path!,
        exportName: trainer.custom_trainer_class_name,
        expectedBase: BaseTrainer,
        orImplements: { name: "Trainer", methods: ["train", "saveSamplerWeights"] },
        recipeDir,
        keyPath: "trainer.custom_trainer_module_path",
        ...(recipeFile !== undefined && { recipeFile }),
      })) as unknown as TrainerClass;
  }
}

/**
 * The options the recipe's trainer is constructed with: `trainer.options`, checked by
 * `trainerClass.optionsSchema` when it declares one (`{}` for the built-in trainers).
 * @throws RecipeError when the schema refuses them.
 */
export function trainerOptions(
  config: RecipeConfig,
  trainerClass: TrainerClass,
  recipeFile?: string,
): Promise<ClassOptions> {
  return classOptions(trainerClass, config.trainer.options, "trainer.options", recipeFile);
}
