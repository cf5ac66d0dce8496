/**
 * The agent an `agent` worker runs: a user module exporting an async function or a class with
 * `run`, called once per episode with the task and an OpenAI client pointed at the rollout's
 * gateway URL.
 * @module
 */
import type OpenAI from "openai";
import type { RolloutTask } from "../contracts/task.js";
import type { ChatMessage } from "../wire/tokenizer.js";
import { importFile } from "../recipe/import-module.js";
import { parseModuleReference } from "../recipe/module-ref.js";
import { findRecipeFile, notFoundMessage } from "../recipe/paths.js";
import { ConfigError } from "../errors.js";

/** What an agent receives besides its task. */
export interface AgentContext {
  /** An OpenAI client whose base URL is this episode's gateway URL (no retries). */
  openai: OpenAI;
  /** The episode's OpenAI-compatible base URL (ends in `/v1`), for agents that build their own client. */
  baseURL: string;
  /** The model name to send (the gateway serves the policy whatever name is sent). */
  model: string;
  /** Aborted when the episode times out or the run stops. */
  signal: AbortSignal;
}

/**
 * What an agent returns as an object. Every field is optional; the evaluator receives the whole
 * object as `result`, other fields included. `final_answer` keeps NexAU's spelling; `finalAnswer`
 * and `answer` are read too, in that order.
 */
export interface AgentEpisodeResult {
  /** The final answer (else the model's last reply is). */
  final_answer?: string;
  /** The final answer, when `final_answer` is not given. */
  finalAnswer?: string;
  /** The final answer, when neither of the above is given. */
  answer?: string;
  /** The episode's reward, used when no evaluator is configured. */
  reward?: number;
  /** The conversation as the agent last saw it (OpenAI chat messages), for the evaluator. */
  history?: ReadonlyArray<ChatMessage | OpenAI.ChatCompletionMessageParam>;
  /** True when the agent stopped before it finished (its turns ran out): the episode counts as truncated. */
  truncated?: boolean;
  /** Anything else, passed to the evaluator as part of `result`. */
  [key: string]: unknown;
}

/**
 * What an agent returns: its final answer as a string, an {@link AgentEpisodeResult}, or nothing
 * (the model's last reply is the final answer).
 */
export type AgentResult = string | AgentEpisodeResult | undefined | void;

/**
 * An agent: runs one task and returns its {@link AgentResult} (or a promise of it).
 */
export type AgentFunction = (task: RolloutTask, context: AgentContext) => AgentResult | Promise<AgentResult>;

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
