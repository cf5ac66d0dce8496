/**
 * The rollout worker class a recipe names.
 * @module
 */
import { loadUserClass } from "../../recipe/user-module.js";
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import { BackendNotAvailableError } from "../errors.js";
import { BaseRolloutWorker, type RolloutWorkerContext } from "./base.js";
import { PigLatinRolloutWorker } from "./pig-latin.js";
import { SimpleRolloutWorker } from "./simple.js";
import { SingleTurnMathRolloutWorker } from "./single-turn-math.js";

/** A concrete rollout worker class. */
export type RolloutWorkerClass = new (context: RolloutWorkerContext) => BaseRolloutWorker;

/**
 * The class for `rollout_worker.type`: `pig_latin`, `single_turn_math` (also `agent` with
 * `agent_cls: single_turn_math`), `simple`, or `custom` (the recipe's
 * `custom_rollout_worker_class_name` exported by `custom_rollout_worker_module_path`).
 * @throws UserModuleError for a custom class that cannot be loaded,
 * {@link BackendNotAvailableError} for `nexau`.
 */
export async function resolveRolloutWorkerClass(config: RecipeConfig, recipeDir: string, recipeFile?: string): Promise<RolloutWorkerClass> {
  const worker = config.rollout_worker;
  switch (worker.type) {
    case "pig_latin":
      return PigLatinRolloutWorker;
    case "single_turn_math":
    case "agent":
      return SingleTurnMathRolloutWorker;
    case "simple":
      return SimpleRolloutWorker;
    case "custom":
      return loadUserClass({
        modulePath: worker.custom_rollout_worker_module_path!,
        exportName: worker.custom_rollout_worker_class_name,
        expectedBase: BaseRolloutWorker,
        recipeDir,
        keyPath: "rollout_worker.custom_rollout_worker_module_path",
        ...(recipeFile !== undefined && { recipeFile }),
      }) as Promise<RolloutWorkerClass>;
    case "nexau":
      throw new BackendNotAvailableError(
        "rollout_worker.type `nexau` is not available yet in this version of nexrl (the agent service has not landed); write a custom worker (type: custom) that calls this.inferenceClient.chat",
      );
  }
}
