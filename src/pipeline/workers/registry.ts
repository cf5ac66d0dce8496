/**
 * The rollout worker class a recipe names.
 * @module
 */
import { loadUserClass } from "../../recipe/user-module.js";
import type { RecipeConfig } from "../../recipe/schema/recipe.js";
import { BaseRolloutWorker, type RolloutWorkerContext } from "./base.js";
import { PigLatinRolloutWorker } from "./pig-latin.js";
import { SimpleRolloutWorker } from "./simple.js";
import { SingleTurnMathRolloutWorker } from "./single-turn-math.js";

/** A concrete rollout worker class. */
export type RolloutWorkerClass = new (context: RolloutWorkerContext) => BaseRolloutWorker;

/** Whether an `agent` worker runs NexRL's built-in `single_turn_math` agent rather than an agent of the agent service. */
function isBuiltinAgent(worker: RecipeConfig["rollout_worker"]): boolean {
  return (
    worker.agent_cls !== undefined ||
    (worker.agent_module_path == null && worker.nexau_agent_config_path === undefined && !worker.agent?.external)
  );
}

/**
 * The class for `rollout_worker.type`: `pig_latin`, `single_turn_math` (also `agent` with
 * `agent_cls: single_turn_math` or no agent of its own), `simple`, `agent` / `nexau` (the agent
 * service's worker: an agent module, a declarative agent or external agents, through the agent
 * gateway), or `custom` (the recipe's `custom_rollout_worker_class_name` exported by
 * `custom_rollout_worker_module_path`).
 * @param signal ends the run: the agent gateway closes when it aborts.
 * @throws RecipeError for a custom class or evaluator that cannot be loaded, ConfigError
 * for an agent that cannot be loaded.
 */
export async function resolveRolloutWorkerClass(
  config: RecipeConfig,
  recipeDir: string,
  recipeFile?: string,
  signal?: AbortSignal,
): Promise<RolloutWorkerClass> {
  const worker = config.rollout_worker;
  switch (worker.type) {
    case "pig_latin":
      return PigLatinRolloutWorker;
    case "single_turn_math":
      return SingleTurnMathRolloutWorker;
    case "agent":
    case "nexau": {
      if (worker.type === "agent" && isBuiltinAgent(worker)) return SingleTurnMathRolloutWorker;
      // Loaded on demand: the agent service sits on top of the pipeline.
      const { createAgentWorkerClass } = await import("../../agent/worker-class.js");
      return createAgentWorkerClass(config, { recipeDir, ...(recipeFile !== undefined && { recipeFile }) }, signal);
    }
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
  }
}
