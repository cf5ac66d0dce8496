/**
 * The command lines of the commands that read a finished (or running) run folder:
 * `nexrl report`, `nexrl sample` and `nexrl export`.
 * @module
 */
import { corsOrigin } from "./cors-origin.js";
import { UsageError } from "../errors.js";
import { commandSpec } from "./commands.js";
import { parseOptions, type HelpCommand } from "./options.js";

/** A parsed `nexrl report` command line. */
export interface ReportCommand {
  /** Discriminator. */
  kind: "report";
  /** The run folder. */
  runDir: string;
  /** The HTML file to write (default: `report.html` in the run folder). */
  output?: string;
  /** Open the report in the user's browser. */
  open: boolean;
  /** Serve the report on 127.0.0.1 and keep it current until Ctrl-C. */
  watch: boolean;
  /** `--watch`'s port; 0 picks a free one. */
  port: number;
  /** `--watch`'s extra host names requests may be addressed to (`--allow-host`). */
  allowedHosts?: string[];
  /** `--watch`'s origins whose pages may read the report (`--cors`). */
  corsOrigins?: string[];
  /** How often the watched page polls, in ms. */
  intervalMs: number;
}

/** A parsed `nexrl sample` command line. */
export interface SampleCommand {
  /** Discriminator. */
  kind: "sample";
  /** `RUN_DIR[:step]`. */
  model: string;
  /** The prompt; undefined reads prompts from standard input, one per line. */
  prompt?: string;
  /** Wrap each prompt as a user message in the model's chat template. */
  chat: boolean;
  /** Completions per prompt. */
  n: number;
  /** Softmax temperature (default: the recipe's `rollout_worker.temperature`, else 1). */
  temperature?: number;
  /** Most tokens per completion (default: the recipe's `rollout_worker.max_response_length`, else 256). */
  maxTokens?: number;
  /** Print each token's logprob. */
  logprobs: boolean;
  /** Print one JSON object per completion instead of text. */
  json: boolean;
  /** Sampling seed. */
  seed?: number;
}

/** A parsed `nexrl export` command line. */
export interface ExportCommand {
  /** Discriminator. */
  kind: "export";
  /** `RUN_DIR[:step]`. */
  model: string;
  /** What to write: Hugging Face's files, `model.gguf`, or both (`--format`, default `both`). */
  format: (typeof EXPORT_FORMAT_NAMES)[number];
  /** The folder to write into (default: `RUN_DIR/export/step_NNNNNN`). */
  output?: string;
  /** `base_model_name_or_path` of a `peft` adapter (`--base-model`). */
  baseModel?: string;
  /** A base model folder to merge a `peft` adapter into (`--merge`). */
  merge?: string;
}

/** The values of `nexrl export --format`. */
export const EXPORT_FORMAT_NAMES = ["hf", "gguf", "both", "peft"] as const;

/** A parsed `nexrl checkpoints` command line. */
export interface CheckpointsCommand {
  /** Discriminator. */
  kind: "checkpoints";
  /** `list`, `delete` or `download`. */
  action: (typeof CHECKPOINTS_ACTIONS)[number];
  /** `RUN_DIR[:STEP]` or `tinker://` paths; none for `list`: every checkpoint of the key. */
  targets: string[];
  /** Where `download` extracts archives (`--output`). */
  output?: string;
}

/** The actions of `nexrl checkpoints`. */
export const CHECKPOINTS_ACTIONS = ["list", "delete", "download"] as const;

/** The options of `command`, with its positionals. */
function parse(
  args: readonly string[],
  command: "report" | "sample" | "export" | "checkpoints",
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  const { values, positionals } = parseOptions(commandSpec(command), args);
  return { values: values as Record<string, string | boolean | undefined>, positionals };
}

function integer(
  flag: string,
  text: string | undefined,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new UsageError(
      `${flag} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : " up"}, got "${text}"`,
    );
  return value;
}

/** Parses the arguments of `nexrl report` (after the word `report`). */
export function parseReport(args: readonly string[]): ReportCommand | HelpCommand {
  const { values, positionals } = parse(args, "report");
  if (values.help) return { kind: "help", command: "report" };
  if (positionals.length !== 1)
    throw new UsageError(
      positionals.length === 0
        ? "nexrl report needs the run folder: nexrl report RUN_DIR [--output report.html] [--open] [--watch]"
        : `nexrl report takes one run folder, got ${positionals.length}: ${positionals.join(" ")}`,
    );
  if (values.watch && values.output !== undefined)
    throw new UsageError("--watch serves the report instead of writing a file; leave out --output with it");
  const allowedHosts = values["allow-host"] as string[] | undefined;
  const cors = values.cors as string[] | undefined;
  if (!values.watch && (allowedHosts ?? cors) !== undefined)
    throw new UsageError("--allow-host and --cors apply to the server of --watch; add --watch or leave them out");
  const interval = integer("--interval", values.interval as string | undefined, 200);
  return {
    kind: "report",
    runDir: positionals[0]!,
    open: values.open === true,
    watch: values.watch === true,
    port: integer("--port", values.port as string | undefined, 0, 65535) ?? 0,
    intervalMs: interval ?? 2000,
    ...(values.output !== undefined && { output: values.output as string }),
    ...(allowedHosts !== undefined && { allowedHosts }),
    ...(cors !== undefined && { corsOrigins: cors.map((o) => corsOrigin(o)) }),
  };
}

/** Parses the arguments of `nexrl sample` (after the word `sample`). */
export function parseSample(args: readonly string[]): SampleCommand | HelpCommand {
  const { values, positionals } = parse(args, "sample");
  if (values.help) return { kind: "help", command: "sample" };
  if (positionals.length === 0 || positionals.length > 2)
    throw new UsageError(
      positionals.length === 0
        ? "nexrl sample needs a run folder: nexrl sample RUN_DIR[:STEP] [PROMPT] (prompts from standard input without PROMPT)"
        : `nexrl sample takes RUN_DIR[:STEP] and at most one PROMPT (quote it), got ${positionals.length} arguments`,
    );
  let temperature: number | undefined;
  if (values.temperature !== undefined) {
    temperature = Number(values.temperature);
    if (!Number.isFinite(temperature) || temperature < 0)
      throw new UsageError(`--temperature must be a number ≥ 0 (0 samples greedily), got "${values.temperature}"`);
  }
  const maxTokens = integer("--max-tokens", values["max-tokens"] as string | undefined, 1);
  const seed = integer("--seed", values.seed as string | undefined, 0);
  return {
    kind: "sample",
    model: positionals[0]!,
    chat: values.chat === true,
    n: integer("-n", values.n as string | undefined, 1, 64) ?? 1,
    logprobs: values.logprobs === true,
    json: values.json === true,
    ...(positionals[1] !== undefined && { prompt: positionals[1] }),
    ...(temperature !== undefined && { temperature }),
    ...(maxTokens !== undefined && { maxTokens }),
    ...(seed !== undefined && { seed }),
  };
}

/** Parses the arguments of `nexrl export` (after the word `export`). */
export function parseExport(args: readonly string[]): ExportCommand | HelpCommand {
  const { values, positionals } = parse(args, "export");
  if (values.help) return { kind: "help", command: "export" };
  if (positionals.length !== 1)
    throw new UsageError(
      positionals.length === 0
        ? "nexrl export needs a run folder: nexrl export RUN_DIR[:STEP] [--format hf|gguf|both|peft] [--output DIR]"
        : `nexrl export takes one RUN_DIR[:STEP] or tinker:// path, got ${positionals.length} arguments`,
    );
  const format = (values.format as string | undefined) ?? (positionals[0]!.startsWith("tinker://") ? "peft" : "both");
  if (!(EXPORT_FORMAT_NAMES as readonly string[]).includes(format))
    throw new UsageError(`unknown --format "${format}"; use one of ${EXPORT_FORMAT_NAMES.join(", ")}`);
  return {
    kind: "export",
    model: positionals[0]!,
    format: format as ExportCommand["format"],
    ...(values.output !== undefined && { output: values.output as string }),
    ...(values["base-model"] !== undefined && { baseModel: values["base-model"] as string }),
    ...(values.merge !== undefined && { merge: values.merge as string }),
  };
}

/** Parses the arguments of `nexrl checkpoints` (after the word `checkpoints`). */
export function parseCheckpoints(args: readonly string[]): CheckpointsCommand | HelpCommand {
  const { values, positionals } = parse(args, "checkpoints");
  if (values.help) return { kind: "help", command: "checkpoints" };
  const [action, ...targets] = positionals;
  if (action === undefined || !(CHECKPOINTS_ACTIONS as readonly string[]).includes(action))
    throw new UsageError(
      `nexrl checkpoints needs an action: ${CHECKPOINTS_ACTIONS.join(", ")}${action === undefined ? "" : ` (got "${action}")`}`,
    );
  if (action !== "list" && targets.length === 0)
    throw new UsageError(`nexrl checkpoints ${action} needs a RUN_DIR[:STEP] or tinker:// path`);
  if (values.output !== undefined && action !== "download")
    throw new UsageError("--output applies to nexrl checkpoints download only");
  return {
    kind: "checkpoints",
    action: action as CheckpointsCommand["action"],
    targets,
    ...(values.output !== undefined && { output: values.output as string }),
  };
}
