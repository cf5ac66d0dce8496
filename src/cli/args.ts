import { parseTinkerFlag } from "../server/tinker-flags.js";
import {
  parseCheckpoints,
  parseExport,
  parseReport,
  parseSample,
  type CheckpointsCommand,
  type ExportCommand,
  type ReportCommand,
  type SampleCommand,
} from "./after-run-args.js";
import { corsOrigin } from "./cors-origin.js";
import { ConfigError, UsageError } from "../errors.js";
import { COMMAND_NAMES, commandSpec } from "./commands.js";
import { helpPointer, parseOptions, type HelpCommand } from "./options.js";
import { didYouMean } from "../recipe/suggest.js";

/** Process exit codes of the `nexrl` command (the README's table lists them too). */
export const EXIT_CODES = {
  /** Success. */
  ok: 0,
  /** The recipe or its configuration is invalid (also a YAML file whose aliases expand too far). */
  invalidRecipe: 1,
  /** The command line is malformed. */
  usage: 2,
  /**
   * The run failed: a rollout failure the policy does not skip, a trainer or service error, an
   * uncaught error in user code, a checkpoint that cannot be resumed (another model, changed
   * settings); or it asked for something this version cannot do yet.
   */
  runFailed: 3,
  /** The output folder cannot be used: not writable (read-only, immutable, no permission), under a file, or in use by another run. */
  outputDir: 4,
  /** A training step had no successful rollout: every rollout failed and `policy: continue` skipped them all. */
  noRolloutSucceeded: 5,
  /** The run hung: a rollout (under a stopping policy) or other user code never settled and nothing else could progress. */
  hung: 6,
  /** Interrupted by Ctrl-C (SIGINT): the step in flight finished and a checkpoint was saved (a second Ctrl-C quits at once). */
  interrupted: 130,
  /** Terminated by SIGTERM (`docker stop`, Kubernetes, `timeout`): handled like the first Ctrl-C. */
  terminated: 143,
} as const;

/** The modes NexRL's CLI knows; only `training-service` runs here. */
export type CliMode = "training-service" | "self-hosted";

/** A parsed `nexrl` command line. */
export type CliCommand =
  | HelpCommand
  | { kind: "version" }
  | { kind: "validate"; configPath: string; overrides: string[]; verbose?: true }
  | {
      kind: "run";
      mode: CliMode;
      configPath: string;
      overrides: string[];
      runNexrl: boolean;
      tag?: string;
      outputDir?: string;
      /** Print the whole stack and cause chain of a failure (also `NEXRL_DEBUG=1`). */
      verbose?: true;
    }
  | ServeCommand
  | WorkerCommand
  | ReportCommand
  | SampleCommand
  | ExportCommand
  | CheckpointsCommand;

/** A parsed `nexrl worker` command line. */
export interface WorkerCommand {
  kind: "worker";
  /** The run's recipe (its worker and agent modules, and `rollout_worker.distributed`). */
  configPath: string;
  /** Recipe overrides. */
  overrides: string[];
  /** The Redis URL, instead of the recipe's `rollout_worker.distributed.url`. */
  redis?: string;
  /** Rollouts at once (default: the recipe's `rollout_worker.num_workers`). */
  concurrency?: number;
  /** The consumer name (default `host-pid`). */
  name?: string;
  /** Print whole stacks on failure. */
  verbose?: true;
}

/** Protocols `nexrl serve` can speak. */
export const SERVE_PROTOCOLS = ["tinker", "weaver", "openai", "all"] as const;

/** A parsed `nexrl serve` command line. */
export interface ServeCommand {
  /** Discriminator. */
  kind: "serve";
  /** Which protocols to serve. */
  protocol: (typeof SERVE_PROTOCOLS)[number];
  /** Interface to bind. */
  host: string;
  /** Port to listen on; 0 picks a free one. */
  port: number;
  /** Where models write their files; default: a new temporary folder. */
  outputDir?: string;
  /** Fault-injection spec, e.g. `429:0.1,drop:0.05`. */
  faults?: string;
  /** Seed of the faults and of models created without one. */
  seed: number;
  /** API key every request must carry (else `NEXRL_SERVE_API_KEY`; none on loopback by default). */
  apiKey?: string;
  /** Serve a non-loopback host without an API key. */
  insecure?: boolean;
  /** Tinker `client/config` flags to answer (`--tinker-flag KEY=VALUE`). */
  tinkerFlags?: Record<string, boolean | number | string>;
  /** Run checkpoints to serve on the OpenAI-compatible endpoints (`RUN_DIR[:step]`, `--model`). */
  models?: string[];
  /** Threads of each model's engine; default: the machine's available parallelism. */
  threads?: number;
  /** Seconds without a heartbeat after which a session expires (`--session-timeout`; 0: never). */
  sessionTimeoutSeconds?: number;
  /** Memory budget of the models, in MB of 2^20 bytes (`--memory-budget`; 0: none). */
  memoryBudgetMB?: number;
  /** More host names requests may be addressed to (`--allow-host`). */
  allowedHosts?: string[];
  /** Origins whose browser requests are served (`--cors`). */
  corsOrigins?: string[];
}

/** `key.path=value`, `+key=value` (add) or `++key=value` (add or set). */
const OVERRIDE = /^\+{0,2}[A-Za-z_][\w-]*(\.[\w-]+)*=/;

/** The positionals of a recipe command, all of which must be overrides. */
function overridesOf(positionals: readonly string[], name: string): string[] {
  const bad = positionals.find((p) => !OVERRIDE.test(p));
  if (bad !== undefined)
    throw new UsageError(
      `unexpected argument "${bad}"; overrides look like key.path=value (e.g. trainer.total_train_steps=10)\n${helpPointer(commandSpec(name))}`,
    );
  return [...positionals];
}

/** The recipe of a recipe command (`-c`, `--train-config` or `--config`). */
function recipeOf(values: Record<string, unknown>, name: string): string {
  const configPath = (values["train-config"] ?? values.config) as string | undefined;
  if (!configPath)
    throw new UsageError(
      `no recipe given; pass it with -c/--train-config PATH (a .yaml or .ts recipe)\n${helpPointer(commandSpec(name))}`,
    );
  return configPath;
}

const str = (value: unknown): string | undefined => value as string | undefined;

/** The number of an option that takes a number >= 0, 0 meaning `zero` (undefined when not given). */
function nonNegative(value: unknown, flag: string, zero: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (str(value)!.trim() === "" || !Number.isFinite(number) || number < 0)
    throw new UsageError(`${flag} must be a number >= 0 (0: ${zero}), got "${str(value)}"`);
  return number;
}

function parseServe(args: readonly string[]): CliCommand {
  const { values, positionals } = parseOptions(commandSpec("serve"), args);
  if (values.help) return { kind: "help", command: "serve" };
  if (positionals.length > 0)
    throw new UsageError(
      `nexrl serve takes no arguments, got "${positionals[0]}"\n${helpPointer(commandSpec("serve"))}`,
    );
  const protocol = str(values.protocol) ?? "all";
  if (!(SERVE_PROTOCOLS as readonly string[]).includes(protocol))
    throw new UsageError(`unknown protocol "${protocol}"; use one of ${SERVE_PROTOCOLS.join(", ")}`);
  const port = Number(values.port ?? "8000");
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--port must be an integer from 0 to 65535 (0 picks a free port), got "${str(values.port)}"`);
  const seed = Number(values.seed ?? "0");
  if (!Number.isSafeInteger(seed)) throw new UsageError(`--seed must be an integer, got "${str(values.seed)}"`);
  const apiKey = str(values["api-key"]);
  if (apiKey !== undefined && apiKey.trim() === "")
    throw new UsageError("--api-key is empty; give the key clients must send (or set NEXRL_SERVE_API_KEY)");
  let tinkerFlags: Record<string, boolean | number | string> | undefined;
  for (const spec of (values["tinker-flag"] as string[] | undefined) ?? []) {
    try {
      const [key, value] = parseTinkerFlag(spec);
      (tinkerFlags ??= {})[key] = value;
    } catch (error) {
      if (error instanceof ConfigError) throw new UsageError(`--tinker-flag: ${error.message}`);
      throw error;
    }
  }
  const threads = values.threads === undefined ? undefined : Number(values.threads);
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1 && threads <= 256))
    throw new UsageError(`--threads must be an integer from 1 to 256, got "${str(values.threads)}"`);
  const sessionTimeoutSeconds = nonNegative(values["session-timeout"], "--session-timeout", "sessions never expire");
  const memoryBudgetMB = nonNegative(values["memory-budget"], "--memory-budget", "no budget");
  return {
    kind: "serve",
    protocol: protocol as ServeCommand["protocol"],
    host: str(values.host) ?? "127.0.0.1",
    port,
    seed,
    ...(values["output-dir"] !== undefined && { outputDir: str(values["output-dir"])! }),
    ...(values.faults !== undefined && { faults: str(values.faults)! }),
    ...(apiKey !== undefined && { apiKey }),
    ...(values.insecure === true && { insecure: true }),
    ...(tinkerFlags && { tinkerFlags }),
    ...(values.model !== undefined && { models: values.model as string[] }),
    ...(threads !== undefined && { threads }),
    ...(sessionTimeoutSeconds !== undefined && { sessionTimeoutSeconds }),
    ...(memoryBudgetMB !== undefined && { memoryBudgetMB }),
    ...(values["allow-host"] !== undefined && { allowedHosts: values["allow-host"] as string[] }),
    ...(values.cors !== undefined && { corsOrigins: (values.cors as string[]).map((o) => corsOrigin(o)) }),
  };
}

/** Parses the arguments of `nexrl worker`. */
function parseWorker(argv: readonly string[]): CliCommand {
  const { values, positionals } = parseOptions(commandSpec("worker"), argv);
  if (values.help) return { kind: "help", command: "worker" };
  const overrides = overridesOf(positionals, "worker");
  const configPath = recipeOf(values, "worker");
  let concurrency: number | undefined;
  if (values.concurrency !== undefined) {
    concurrency = Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new UsageError(`--concurrency must be a whole number of at least 1, not "${str(values.concurrency)}"`);
  }
  return {
    kind: "worker",
    configPath,
    overrides,
    ...(values.redis !== undefined && { redis: str(values.redis)! }),
    ...(concurrency !== undefined && { concurrency }),
    ...(values.name !== undefined && { name: str(values.name)! }),
    ...(values.verbose === true && { verbose: true as const }),
  };
}

/** Parses `nexrl validate`, `nexrl train` and NexRL's form (`name` is `nexrl`). */
function parseRecipeCommand(name: "validate" | "train" | "nexrl", args: readonly string[]): CliCommand {
  const { values, positionals } = parseOptions(commandSpec(name), args);
  if (values.help) return { kind: "help", ...(name !== "nexrl" && { command: name }) };
  if (values.version) return { kind: "version" };
  const overrides = overridesOf(positionals, name);
  if (name === "nexrl" && args.length === 0) return { kind: "help" };
  const configPath = recipeOf(values, name);
  const verbose = values.verbose === true ? { verbose: true as const } : {};
  if (name === "validate") return { kind: "validate", configPath, overrides, ...verbose };
  const mode = str(values.mode) ?? "training-service";
  if (mode !== "training-service" && mode !== "self-hosted") {
    throw new UsageError(`unknown mode "${mode}"; use -m training-service`);
  }
  return {
    kind: "run",
    mode,
    configPath,
    overrides,
    runNexrl: name === "train" || values["run-nexrl"] === true,
    ...(values.tag !== undefined && { tag: str(values.tag)! }),
    ...(values["output-dir"] !== undefined && { outputDir: str(values["output-dir"])! }),
    ...verbose,
  };
}

/** Words users try for a command that has another name here. */
const COMMAND_SYNONYMS: Record<string, string> = { run: "train", fit: "train", check: "validate", eval: "sample" };

/** The error for a first word that is no command. */
function unknownCommand(word: string): UsageError {
  const close = COMMAND_SYNONYMS[word] ?? didYouMean(word, COMMAND_NAMES);
  return new UsageError(
    `unknown command "${word}"${close ? `; did you mean "${close}"?` : ""}\n` +
      `The commands are ${COMMAND_NAMES.join(", ")}, and NexRL's form: nexrl -m training-service -c RECIPE [--run-nexrl].\n` +
      "Run `nexrl --help` for what each does, `nexrl COMMAND --help` for its options.",
  );
}

/** Parses `argv` (without the node and script entries) into a {@link CliCommand}. */
export function parseCommandLine(argv: readonly string[]): CliCommand {
  const [first, ...rest] = argv;
  switch (first) {
    case "serve":
      return parseServe(rest);
    case "report":
      return parseReport(rest);
    case "sample":
      return parseSample(rest);
    case "export":
      return parseExport(rest);
    case "checkpoints":
      return parseCheckpoints(rest);
    case "worker":
      return parseWorker(rest);
    case "validate":
    case "train":
      return parseRecipeCommand(first, rest);
    case "help": {
      const [command] = rest;
      if (command === undefined) return { kind: "help" };
      if (!COMMAND_NAMES.includes(command)) throw unknownCommand(command);
      return { kind: "help", command };
    }
    default:
      break;
  }
  if (first !== undefined && !first.startsWith("-") && !OVERRIDE.test(first)) throw unknownCommand(first);
  return parseRecipeCommand("nexrl", argv);
}
