/**
 * The rollout worker class a recipe names.
 * @module
 */
import { classOptions } from "../recipe/class-options.js";
import { loadUserClass } from "../recipe/user-module.js";
import type { ClassOptions } from "../contracts/options.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { type RolloutWorkerContext } from "../contracts/worker.js";
import { PigLatinRolloutWorker } from "./pig-latin.js";
import { PreferenceRolloutWorker } from "./preference.js";
import { SftRolloutWorker } from "./sft.js";
import { SimpleRolloutWorker } from "./simple.js";
import { SingleTurnMathRolloutWorker } from "./single-turn-math.js";
import { ConfigError } from "../errors.js";

/** A concrete rollout worker class. */
export type RolloutWorkerClass = new (context: RolloutWorkerContext) => BaseRolloutWorker;

/** Where a recipe's own modules are resolved from: its folder, and its file when it has one. */
export interface RecipeBase {
  readonly recipeDir: string;
  readonly recipeFile?: string;
}

/**
 * The `agent` and `nexau` workers of the agent service, which sits above the pipeline: the
 * composition root (`src/builtins.ts`) provides them, so the pipeline never imports `agent/`.
 */
export interface AgentServiceWorkers {
  /** Loads the agent and evaluator, starts the agent gateway (closed when `signal` aborts) and returns the worker class. */
  workerClass(config: RecipeConfig, base: RecipeBase, signal?: AbortSignal): Promise<RolloutWorkerClass>;
  /** What only the agent's episodes can show, said up front (a reward that must come from the agent). */
  notes(config: RecipeConfig): Promise<string[]>;
  /** Loads the agent and evaluator and checks their reward source without starting anything. */
  check(config: RecipeConfig, base: RecipeBase): Promise<void>;
}

let agentService: AgentServiceWorkers | undefined;

/** Makes the agent service's workers available to recipes (called once by the composition root). */
export function provideAgentService(service: AgentServiceWorkers): void {
  agentService = service;
}

function agentServiceWorkers(): AgentServiceWorkers {
  if (agentService === undefined)
    throw new ConfigError(
      `rollout_worker: this recipe runs an agent of the agent service, which was not loaded; import nexrl's package root ("nexrl") or its CLI, which provide it, rather than its internal modules`,
    );
  return agentService;
}

/** Whether an `agent` worker runs NexRL's built-in `single_turn_math` agent rather than an agent of the agent service. */
export function isBuiltinAgent(worker: RecipeConfig["rollout_worker"]): boolean {
  return (
    worker.agent_cls !== undefined ||
    (worker.agent_module_path == null && worker.nexau_agent_config_path === undefined && !worker.agent?.external)
  );
}

/**
 * The class for `rollout_worker.type`: `pig_latin`, `preference`, `sft`, `single_turn_math` (also `agent` with
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
    case "preference":
      return PreferenceRolloutWorker;
    case "sft":
      return SftRolloutWorker;
    case "single_turn_math":
      return SingleTurnMathRolloutWorker;
    case "agent":
    case "nexau": {
      if (!isAgentServiceWorker(worker)) return SingleTurnMathRolloutWorker;
      return agentServiceWorkers().workerClass(
        config,
        { recipeDir, ...(recipeFile !== undefined && { recipeFile }) },
        signal,
      );
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

/**
 * The options the recipe's worker instances are constructed with: `rollout_worker.options`,
 * checked by `workerClass.optionsSchema` when it declares one (`{}` for the built-in workers).
 * @throws RecipeError when the schema refuses them.
 */
export function rolloutWorkerOptions(
  config: RecipeConfig,
  workerClass: RolloutWorkerClass,
  recipeFile?: string,
): Promise<ClassOptions> {
  return classOptions(workerClass, config.rollout_worker.options, "rollout_worker.options", recipeFile);
}

/** Whether the worker runs an agent of the agent service (a module, a declarative agent or external agents). */
function isAgentServiceWorker(worker: RecipeConfig["rollout_worker"]): boolean {
  return worker.type === "nexau" || (worker.type === "agent" && !isBuiltinAgent(worker));
}

/**
 * What only the rollouts of the recipe's worker can show, said up front: for an agent without an
 * evaluator, that its reward must come from the agent.
 * @throws ConfigError for an agent whose episodes nothing could score.
 */
export async function rolloutWorkerNotes(config: RecipeConfig): Promise<string[]> {
  if (!isAgentServiceWorker(config.rollout_worker)) return [];
  return agentServiceWorkers().notes(config);
}

/**
 * Checks that {@link resolveRolloutWorkerClass} would find the recipe's worker — a custom class
 * that accepts the recipe's options, or an agent and its evaluator with a reward source — without
 * starting the agent gateway.
 * @throws as {@link resolveRolloutWorkerClass} does.
 */
export async function checkRolloutWorkerClass(
  config: RecipeConfig,
  recipeDir: string,
  recipeFile?: string,
): Promise<void> {
  if (isAgentServiceWorker(config.rollout_worker)) {
    await agentServiceWorkers().check(config, { recipeDir, ...(recipeFile !== undefined && { recipeFile }) });
    return;
  }
  await rolloutWorkerOptions(config, await resolveRolloutWorkerClass(config, recipeDir, recipeFile), recipeFile);
}
