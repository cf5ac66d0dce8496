/**
 * The rollout worker class of a recipe's `agent` / `nexau` worker: loads the agent and the
 * evaluator, starts the run's gateway, and binds them to {@link AgentRolloutWorker}.
 * @module
 */
import type { BaseRolloutWorker, RolloutWorkerContext } from "../pipeline/workers/base.js";
import { parseModuleReference } from "../recipe/module-ref.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { agentOptionsSchema } from "../recipe/schema/rollout-worker.js";
import { loadUserClass } from "../recipe/user-module.js";
import { loadAgentModule, type AgentFunction } from "./agent-module.js";
import { loadAgentConfig } from "./declarative/config.js";
import { declarativeAgent } from "./declarative/loop.js";
import { AgentSetupError } from "./errors.js";
import { Evaluator } from "./evaluator.js";
import { AgentGateway } from "./gateway.js";
import { AgentRolloutWorker, type AgentWorkerSetup } from "./worker.js";

/** Where the recipe's relative paths resolve from. */
export interface AgentRecipeBase {
  /** The recipe's folder (searched first). */
  recipeDir: string;
  /** The recipe file, for errors. */
  recipeFile?: string;
  /** Searched second (default: the current directory). */
  cwd?: string;
}

async function loadAgent(config: RecipeConfig, base: AgentRecipeBase): Promise<AgentFunction | "external"> {
  const worker = config.rollout_worker;
  if (worker.agent?.external) return "external";
  if (worker.agent_module_path != null) return loadAgentModule(worker.agent_module_path, base);
  if (worker.nexau_agent_config_path !== undefined) {
    return declarativeAgent(await loadAgentConfig(worker.nexau_agent_config_path, worker.nexau_agent_workspace), worker.task_name);
  }
  throw new AgentSetupError(
    `rollout_worker: a \`${worker.type}\` worker needs an agent: set agent_module_path (an agent written in TypeScript), nexau_agent_config_path (a declarative agent_config.yaml) or agent.external: true (agents in other processes)`,
  );
}

/**
 * Loads the agent and evaluator of `config.rollout_worker`, starts the agent gateway and returns
 * the worker class the pipeline constructs. The gateway closes when `signal` aborts (the end of
 * the run); without a signal it does not keep the process alive.
 * @throws {@link AgentSetupError} for a missing or malformed agent, `UserModuleError` for the
 * evaluator, `AgentGatewayError` when the gateway cannot listen.
 */
export async function createAgentWorkerClass(config: RecipeConfig, base: AgentRecipeBase, signal?: AbortSignal): Promise<new (context: RolloutWorkerContext) => BaseRolloutWorker> {
  const worker = config.rollout_worker;
  const options = worker.agent ?? agentOptionsSchema.parse({});
  const agent = await loadAgent(config, base);
  let evaluator: Evaluator | undefined;
  if (worker.evaluator_module_path !== undefined) {
    const { modulePath, exportName } = parseModuleReference(worker.evaluator_module_path);
    const EvaluatorClass = await loadUserClass({
      modulePath,
      exportName,
      expectedBase: Evaluator,
      recipeDir: base.recipeDir,
      keyPath: "rollout_worker.evaluator_module_path",
      ...(base.cwd !== undefined && { cwd: base.cwd }),
      ...(base.recipeFile !== undefined && { recipeFile: base.recipeFile }),
    });
    evaluator = new EvaluatorClass();
  }
  signal?.throwIfAborted();
  const gateway = await AgentGateway.start({ host: options.gateway.host, port: options.gateway.port, modelName: config.service.inference_service.model, unref: signal === undefined });
  signal?.addEventListener("abort", () => void gateway.close(), { once: true });
  const setup: AgentWorkerSetup = { gateway, agent, evaluator, options, modelName: config.service.inference_service.model };
  return class extends AgentRolloutWorker {
    constructor(context: RolloutWorkerContext) {
      super(context, setup);
    }
  };
}
