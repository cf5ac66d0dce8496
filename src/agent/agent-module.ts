/**
 * The agent an `agent` worker runs: a user module exporting an async function or a class with
 * `run`, called once per episode with the task and an OpenAI client pointed at the rollout's
 * gateway URL.
 * @module
 */
import type { AgentContext, AgentFunction, AgentResult } from "../contracts/agent.js";
import type { RolloutTask } from "../contracts/task.js";
import { importFile } from "../recipe/import-module.js";
import { parseModuleReference } from "../recipe/module-ref.js";
import { findRecipeFile, notFoundMessage } from "../recipe/paths.js";
import { ConfigError } from "../errors.js";

/** True for `class` syntax (not plain or arrow functions). */
export function isClass(value: unknown): value is new () => { run?: unknown } {
  return typeof value === "function" && /^class[\s{]/.test(Function.prototype.toString.call(value));
}

/** Where relative agent paths are looked up. */
export interface AgentModuleBase {
  /** The recipe's folder, searched first. */
  recipeDir: string;
  /** Searched second (default: the current directory). */
  cwd?: string;
}

/**
 * Loads the agent `reference` names (`file.ts`, default export, or `file.ts:name`): a function is
 * called per episode; a class is constructed with no arguments per episode and its `run` called.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a missing file or export, an import failure, or an export
 * that is neither.
 */
export async function loadAgentModule(reference: string, base: AgentModuleBase): Promise<AgentFunction> {
  const { modulePath, exportName } = parseModuleReference(reference);
  const key = "rollout_worker.agent_module_path";
  const { found, tried } = findRecipeFile(modulePath, base);
  if (found === undefined) throw new ConfigError(`${key}: ${notFoundMessage(modulePath, tried)}`);
  const imported = await importFile(found);
  if (!imported.ok)
    throw new ConfigError(`${key}: cannot import ${found}: ${imported.message}`, { cause: imported.cause });
  const value = imported.namespace[exportName];
  if (value === undefined) {
    const names = Object.keys(imported.namespace);
    throw new ConfigError(
      `${key}: ${found} has no export \`${exportName}\` (its exports: ${names.length ? names.join(", ") : "none"}); export the agent function${exportName === "default" ? " as default" : ""}, or name it as file.ts:name`,
    );
  }
  if (isClass(value)) {
    if (typeof value.prototype.run !== "function")
      throw new ConfigError(`${key}: class \`${exportName}\` in ${found} has no run(task, context) method`);
    return (task, context) =>
      (new value() as { run(task: RolloutTask, context: AgentContext): AgentResult | Promise<AgentResult> }).run(
        task,
        context,
      );
  }
  if (typeof value !== "function")
    throw new ConfigError(
      `${key}: \`${exportName}\` in ${found} is a ${typeof value}; export an async function (task, { openai, baseURL, model, signal }) => result, or a class with run`,
    );
  return value as AgentFunction;
}
