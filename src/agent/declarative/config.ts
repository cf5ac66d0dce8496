/**
 * Declarative agents in the NexAU shape: `agent_config.yaml` with a Jinja system prompt, LLM
 * settings, tools (a JSON-schema YAML each plus a binding to a TypeScript function) and a turn
 * limit.
 * @module
 */
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Template } from "@huggingface/jinja";
import { parse } from "yaml";
import { z } from "zod";
import type { RolloutTask } from "../../contracts/task.js";
import { importFile } from "../../recipe/import-module.js";
import { parseModuleReference } from "../../recipe/module-ref.js";
import { findRecipeFile, notFoundMessage } from "../../recipe/paths.js";
import type { ToolDefinition } from "../../wire/tokenizer.js";
import { ConfigError } from "../../errors.js";

/** What a tool function receives besides its arguments. */
export interface ToolContext {
  /** The task of the episode. */
  task: RolloutTask;
  /** Aborted when the episode ends. */
  signal: AbortSignal;
}

/** A tool's implementation: its parsed arguments in, its result out (strings as they are, anything else as JSON). */
export type ToolFunction = (args: Record<string, unknown>, context: ToolContext) => unknown;

/** A tool the agent may call: what the model is told, and what runs. */
export interface AgentTool {
  /** The definition sent as `tools[]`. */
  definition: ToolDefinition;
  /** The bound function. */
  run: ToolFunction;
}

/**
 * A compiled system prompt template: renders the prompt of one episode from its variables. (A
 * structural type rather than the Jinja library's class, so that the public types do not depend
 * on that library's declarations.)
 */
export interface SystemPromptTemplate {
  /** The prompt for these variables (the row's fields, `date`, `task_name`). */
  render(variables: Record<string, unknown>): string;
}

/** A loaded declarative agent. */
export interface DeclarativeAgentConfig {
  /** The agent's name. */
  name: string;
  /** The system prompt template (Jinja, or plain text), rendered per episode; undefined for none. */
  systemPrompt: SystemPromptTemplate | string | undefined;
  /** Most model calls of the loop. */
  maxTurns: number;
  /** Sampling fields sent with every call (from `llm_config`; sent as `max_tokens` and `top_p`). */
  llm: {
    /** Sampling temperature. */
    temperature?: number;
    /** Most tokens per call. */
    maxTokens?: number;
    /** Nucleus sampling mass. */
    topP?: number;
    /** Stop strings. */
    stop?: string | string[];
  };
  /** The tools. */
  tools: AgentTool[];
}

const agentConfigSchema = z.looseObject({
  type: z.literal("agent").optional(),
  name: z.string().min(1).default("agent"),
  system_prompt: z.string().optional(),
  system_prompt_type: z.enum(["jinja", "string"]).default("jinja"),
  max_turns: z.int().min(1).default(8),
  llm_config: z
    .looseObject({
      temperature: z.number().min(0).optional(),
      max_tokens: z.int().min(1).optional(),
      top_p: z.number().gt(0).max(1).optional(),
      stop: z.union([z.string().min(1), z.array(z.string().min(1))]).optional(),
    })
    .prefault({}),
  tools: z
    .array(z.looseObject({ name: z.string().min(1), yaml_path: z.string().min(1), binding: z.string().min(1) }))
    .default([]),
});

const toolYamlSchema = z.looseObject({
  name: z.string().min(1).optional(),
  description: z.string().default(""),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
});

function issueText(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join(".") || "(top)"}: ${issue.message}`).join("; ");
}

async function readYaml(file: string, what: string): Promise<unknown> {
  try {
    return parse(await readFile(file, "utf8")) as unknown;
  } catch (error) {
    throw new ConfigError(`${what} ${file} cannot be read: ${(error as Error).message}`, { cause: error });
  }
}

/** Looks a path up in the workspace, then beside the agent config. */
function locate(value: string, workspace: string, configDir: string, what: string): string {
  const first = findRecipeFile(value, { recipeDir: workspace, cwd: configDir });
  if (first.found === undefined) throw new ConfigError(`${what}: ${notFoundMessage(value, first.tried)}`);
  return first.found;
}

async function loadTool(
  entry: { name: string; yaml_path: string; binding: string },
  workspace: string,
  configDir: string,
  at: string,
): Promise<AgentTool> {
  const yamlFile = locate(entry.yaml_path, workspace, configDir, `${at}.yaml_path`);
  const parsed = toolYamlSchema.safeParse(await readYaml(yamlFile, "tool definition"));
  if (!parsed.success)
    throw new ConfigError(`${at}.yaml_path: ${yamlFile} is not a tool definition: ${issueText(parsed.error)}`);
  const schema = parsed.data.input_schema ?? parsed.data.parameters ?? { type: "object", properties: {} };
  const { modulePath, exportName } = parseModuleReference(entry.binding);
  if (exportName === "default" || !/\.[cm]?[jt]sx?$/.test(modulePath)) {
    throw new ConfigError(
      `${at}.binding: "${entry.binding}" is not a TypeScript binding; write it as path/to/file.ts:functionName (relative to the agent workspace)`,
    );
  }
  const file = locate(modulePath, workspace, configDir, `${at}.binding`);
  const imported = await importFile(file);
  if (!imported.ok)
    throw new ConfigError(`${at}.binding: cannot import ${file}: ${imported.message}`, { cause: imported.cause });
  const run = imported.namespace[exportName];
  if (typeof run !== "function") {
    throw new ConfigError(
      `${at}.binding: ${file} exports no function \`${exportName}\` (its exports: ${Object.keys(imported.namespace).join(", ") || "none"})`,
    );
  }
  return {
    definition: {
      type: "function",
      function: { name: entry.name, description: parsed.data.description, parameters: schema },
    },
    run: run as ToolFunction,
  };
}

/**
 * Loads `agent_config.yaml` and its tools. Tool YAML paths and bindings are looked up in
 * `workspace` first, then beside the config. NexAU keys this runner does not use (`tracers`,
 * `tool_call_mode`, `max_context_tokens`, `llm_config.api_type`, …) are accepted and ignored.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} naming the file and key at fault.
 */
export async function loadAgentConfig(
  configPath: string,
  workspace: string = dirname(configPath),
): Promise<DeclarativeAgentConfig> {
  const parsed = agentConfigSchema.safeParse(await readYaml(configPath, "agent config"));
  if (!parsed.success) throw new ConfigError(`agent config ${configPath} is invalid: ${issueText(parsed.error)}`);
  const config = parsed.data;
  const configDir = dirname(configPath);
  const tools: AgentTool[] = [];
  for (const [i, entry] of config.tools.entries())
    tools.push(await loadTool(entry, workspace, configDir, `${configPath}: tools[${i}]`));
  let systemPrompt: SystemPromptTemplate | string | undefined = config.system_prompt;
  if (systemPrompt !== undefined && config.system_prompt_type === "jinja") {
    try {
      systemPrompt = new Template(systemPrompt);
    } catch (error) {
      throw new ConfigError(`${configPath}: system_prompt is not a valid Jinja template: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  const { temperature, max_tokens, top_p, stop } = config.llm_config;
  return {
    name: config.name,
    systemPrompt,
    maxTurns: config.max_turns,
    llm: {
      ...(temperature !== undefined && { temperature }),
      ...(max_tokens !== undefined && { maxTokens: max_tokens }),
      ...(top_p !== undefined && { topP: top_p }),
      ...(stop !== undefined && { stop }),
    },
    tools,
  };
}
