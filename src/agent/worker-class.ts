/**
 * The rollout worker class of a recipe's `agent` / `nexau` worker: loads the agent and the
 * evaluator, starts the run's gateway, and binds them to {@link AgentRolloutWorker}.
 * @module
 */
import type { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import type { RolloutWorkerContext } from "../contracts/worker.js";
import type { DataRow } from "../contracts/task.js";
import { importFile } from "../recipe/import-module.js";
import { parseModuleReference } from "../recipe/module-ref.js";
import { findRecipeFile } from "../recipe/paths.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { loadUserClass } from "../recipe/user-module.js";
import { workerSettings } from "../recipe/settings.js";
import type { AgentFunction } from "../contracts/agent.js";
import { isClass, loadAgentModule } from "./agent-module.js";
import { loadAgentConfig } from "./declarative/config.js";
import { declarativeAgent } from "./declarative/loop.js";
import { Evaluator, type EvaluationRunResult, type EvaluationTarget } from "../contracts/evaluator.js";
import { AgentGateway } from "./gateway.js";
import { AgentRolloutWorker, type AgentWorkerSetup } from "./worker.js";
import { ConfigError } from "../errors.js";

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
    return declarativeAgent(
      await loadAgentConfig(worker.nexau_agent_config_path, worker.nexau_agent_workspace),
      worker.task_name,
    );
  }
  throw new ConfigError(
    `rollout_worker: a \`${worker.type}\` worker needs an agent: set agent_module_path (an agent written in TypeScript), nexau_agent_config_path (a declarative agent_config.yaml) or agent.external: true (agents in other processes)`,
  );
}

/** An {@link Evaluator} calling `evaluate` (errors name the function). */
function functionEvaluator(
  evaluate: (data: Readonly<DataRow>, target: EvaluationTarget) => EvaluationRunResult | Promise<EvaluationRunResult>,
): Evaluator {
  const FunctionEvaluator = class extends Evaluator {
    override evaluate(
      data: Readonly<DataRow>,
      target: EvaluationTarget,
    ): EvaluationRunResult | Promise<EvaluationRunResult> {
      return evaluate(data, target);
    }
  };
  Object.defineProperty(FunctionEvaluator, "name", { value: evaluate.name || "evaluate" });
  return new FunctionEvaluator();
}

/**
 * The evaluator `reference` names (`file.ts:Name`): a class extending {@link Evaluator},
 * constructed with no arguments, or a function `(data, target) => { reward, extraInfo }`.
 */
async function loadEvaluator(reference: string, base: AgentRecipeBase): Promise<Evaluator> {
  const { modulePath, exportName } = parseModuleReference(reference);
  const { found } = findRecipeFile(modulePath, base);
  const imported = found === undefined ? undefined : await importFile(found);
  const value = imported?.ok ? imported.namespace[exportName] : undefined;
  if (typeof value === "function" && !isClass(value))
    return functionEvaluator(value as Parameters<typeof functionEvaluator>[0]);
  const EvaluatorClass = await loadUserClass({
    modulePath,
    exportName,
    expectedBase: Evaluator,
    recipeDir: base.recipeDir,
    keyPath: "rollout_worker.evaluator_module_path",
    ...(base.cwd !== undefined && { cwd: base.cwd }),
    ...(base.recipeFile !== undefined && { recipeFile: base.recipeFile }),
  });
  return new EvaluatorClass();
}

/**
 * Where the rewards of an agent worker's episodes come from: the evaluator, the agents that push
 * them (`agent.external`), or, without an evaluator, the `reward` an agent module returns, which
 * only its episodes can show (the returned note says so).
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a declarative agent without an evaluator: nothing could
 * give its episodes a reward.
 */
export function agentRewardSource(config: RecipeConfig): { note?: string } {
  const worker = config.rollout_worker;
  if (worker.evaluator_module_path !== undefined || worker.agent?.external) return {};
  if (worker.nexau_agent_config_path !== undefined)
    throw new ConfigError(
      `rollout_worker: the declarative agent of nexau_agent_config_path returns no reward and no evaluator is set, so no episode could be scored; set rollout_worker.evaluator_module_path: file.ts:evaluate (a function (data, target) => { reward }) or a class extending Evaluator`,
    );
  return {
    note: `rollout_worker: no evaluator_module_path, so each episode's reward must be the \`reward\` the agent returns ({ final_answer, reward }); an episode without one fails`,
  };
}

/**
 * Loads the agent and the evaluator of `config.rollout_worker` and checks that its episodes have
 * a reward source ({@link agentRewardSource}), without starting anything: what
 * {@link createAgentWorkerClass} and `nexrl validate` check.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a missing or malformed agent or no reward source,
 * `RecipeError` for the evaluator.
 */
export async function loadAgentParts(
  config: RecipeConfig,
  base: AgentRecipeBase,
): Promise<{ agent: AgentFunction | "external"; evaluator: Evaluator | undefined }> {
  const worker = config.rollout_worker;
  const agent = await loadAgent(config, base);
  agentRewardSource(config);
  const evaluator =
    worker.evaluator_module_path === undefined ? undefined : await loadEvaluator(worker.evaluator_module_path, base);
  return { agent, evaluator };
}

/**
 * Loads the agent and evaluator of `config.rollout_worker`, starts the agent gateway and returns
 * the worker class the pipeline constructs. The gateway closes when `signal` aborts (the end of
 * the run); without a signal it does not keep the process alive.
 * The evaluator (`evaluator_module_path: file.ts:Name`) is a class extending {@link Evaluator}
 * or a plain function `(data, target) => { reward, extraInfo }`.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a missing or malformed agent, `RecipeError` for the
 * evaluator, `ConfigError` when the gateway cannot listen.
 */
export async function createAgentWorkerClass(
  config: RecipeConfig,
  base: AgentRecipeBase,
  signal?: AbortSignal,
): Promise<new (context: RolloutWorkerContext) => BaseRolloutWorker> {
  const options = workerSettings(config).agent;
  const { agent, evaluator } = await loadAgentParts(config, base);
  signal?.throwIfAborted();
  const gateway = await AgentGateway.start({
    host: options.gateway.host,
    port: options.gateway.port,
    allowedHosts: options.gateway.allowedHosts,
    corsOrigins: options.gateway.corsOrigins,
    modelName: config.service.inference_service.model,
    unref: signal === undefined,
  });
  signal?.addEventListener("abort", () => void gateway.close(), { once: true });
  const setup: AgentWorkerSetup = {
    gateway,
    agent,
    evaluator,
    options,
    modelName: config.service.inference_service.model,
  };
  return class extends AgentRolloutWorker {
    constructor(context: RolloutWorkerContext) {
      super(context, setup);
    }
  };
}
