import { parseArgs } from "node:util";
import { NexrlError } from "../types/errors.js";

/** Thrown for a malformed command line; the CLI exits with {@link EXIT_CODES.usage}. */
export class UsageError extends NexrlError {}

/** Process exit codes of the `nexrl` command. */
export const EXIT_CODES = {
  /** Success. */
  ok: 0,
  /** The recipe or its configuration is invalid. */
  invalidRecipe: 1,
  /** The command line is malformed. */
  usage: 2,
  /** The run failed, or asked for something this version cannot do yet. */
  runFailed: 3,
  /** Interrupted (SIGINT). */
  interrupted: 130,
} as const;

/** The modes NexRL's CLI knows; only `training-service` runs here. */
export type CliMode = "training-service" | "self-hosted";

/** A parsed `nexrl` command line. */
export type CliCommand =
  | { kind: "help" }
  | { kind: "version" }
  | { kind: "validate"; configPath: string; overrides: string[] }
  | {
      kind: "run";
      mode: CliMode;
      configPath: string;
      overrides: string[];
      runNexrl: boolean;
      tag?: string;
      outputDir?: string;
    }
  | ServeCommand;

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
  /** Threads of each model's engine; default: the machine's available parallelism. */
  threads?: number;
}

function parseServe(args: readonly string[]): CliCommand {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      options: {
        protocol: { type: "string", short: "p" },
        host: { type: "string" },
        port: { type: "string" },
        "output-dir": { type: "string", short: "o" },
        faults: { type: "string" },
        seed: { type: "string" },
        threads: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nRun \`nexrl serve --help\` for the options.`);
  }
  if (values.help) return { kind: "help" };
  const protocol = values.protocol ?? "all";
  if (!(SERVE_PROTOCOLS as readonly string[]).includes(protocol))
    throw new UsageError(`unknown protocol "${protocol}"; use one of ${SERVE_PROTOCOLS.join(", ")}`);
  const port = Number(values.port ?? "8000");
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--port must be an integer from 0 to 65535 (0 picks a free port), got "${values.port}"`);
  const seed = Number(values.seed ?? "0");
  if (!Number.isSafeInteger(seed)) throw new UsageError(`--seed must be an integer, got "${values.seed}"`);
  const threads = values.threads === undefined ? undefined : Number(values.threads);
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1 && threads <= 256))
    throw new UsageError(`--threads must be an integer from 1 to 256, got "${values.threads}"`);
  return {
    kind: "serve",
    protocol: protocol as ServeCommand["protocol"],
    host: values.host ?? "127.0.0.1",
    port,
    seed,
    ...(values["output-dir"] !== undefined && { outputDir: values["output-dir"] }),
    ...(values.faults !== undefined && { faults: values.faults }),
    ...(threads !== undefined && { threads }),
  };
}

const OVERRIDE = /^\+?[A-Za-z_][\w-]*(\.[\w-]+)*=/;

/** Parses `argv` (without the node and script entries) into a {@link CliCommand}. */
export function parseCommandLine(argv: readonly string[]): CliCommand {
  const [first, ...rest] = argv;
  if (first === "serve") return parseServe(rest);
  const subcommand = first === "validate" ? first : undefined;
  let parsed;
  try {
    parsed = parseArgs({
      args: subcommand ? rest : [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        mode: { type: "string", short: "m" },
        "train-config": { type: "string", short: "c" },
        config: { type: "string" },
        "run-nexrl": { type: "boolean", short: "r" },
        tag: { type: "string", short: "t" },
        "output-dir": { type: "string", short: "o" },
        help: { type: "boolean", short: "h" },
        version: { type: "boolean", short: "v" },
      },
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nRun \`nexrl --help\` for the options.`);
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: "help" };
  if (values.version) return { kind: "version" };
  const overrides: string[] = [];
  for (const p of positionals) {
    if (!OVERRIDE.test(p)) {
      throw new UsageError(
        `unexpected argument "${p}"; overrides look like key.path=value (e.g. trainer.total_train_steps=10); the only command is validate`,
      );
    }
    overrides.push(p);
  }
  const configPath = values["train-config"] ?? values.config;
  if (!configPath) {
    if (argv.length === 0) return { kind: "help" };
    throw new UsageError("no recipe given; pass it with -c/--train-config PATH (a .yaml or .ts recipe)");
  }
  if (subcommand === "validate") return { kind: "validate", configPath, overrides };
  const mode = values.mode ?? "training-service";
  if (mode !== "training-service" && mode !== "self-hosted") {
    throw new UsageError(`unknown mode "${mode}"; use -m training-service`);
  }
  return {
    kind: "run",
    mode,
    configPath,
    overrides,
    runNexrl: values["run-nexrl"] ?? false,
    ...(values.tag !== undefined && { tag: values.tag }),
    ...(values["output-dir"] !== undefined && { outputDir: values["output-dir"] }),
  };
}

/** The text of `nexrl --help`. */
export function helpText(version: string): string {
  return `nexrl ${version} — post-train LLMs and agents with RL and SFT

Usage:
  nexrl -m training-service -c RECIPE [--run-nexrl] [--tag TAG] [--output-dir DIR] [key.path=value ...]
  nexrl validate -c RECIPE [key.path=value ...]
  nexrl serve [--protocol tinker|weaver|openai|all] [--host HOST] [--port PORT] [--output-dir DIR]
              [--faults SPEC] [--seed N] [--threads N]

Options:
  -m, --mode MODE            training-service (the default; trains through a training service:
                             local, tinker or weaver). self-hosted is not supported.
  -c, --train-config PATH    the recipe: YAML in NexRL's schema or a .ts module whose default
                             export is defineRecipe({...}). Alias: --config.
  -r, --run-nexrl            run the training. Without it, the resolved recipe and the plan are
                             printed and nothing runs.
  -t, --tag TAG              names the run; outputs go to $NEXRL_STORAGE_PATH/<TAG>
                             (./runs/<TAG> by default; a UTC timestamp without a tag).
  -o, --output-dir DIR       where the run writes metrics, samples and checkpoints.
  -h, --help                 this text.
  -v, --version              the version.
  key.path=value             override a recipe key, e.g. trainer.total_train_steps=10.

Commands:
  validate                   load and check a recipe; print the first problems and exit 1 if bad.
  serve                      serve the local engine over the Tinker, Weaver and OpenAI-compatible
                             protocols until stopped (Ctrl-C), so tinker/weaver recipes run
                             without a remote service.

Serve options:
  -p, --protocol PROTOCOL    tinker, weaver, openai (/v1/completions, /v1/chat/completions) or
                             all (the default).
      --host HOST            interface to bind (default 127.0.0.1: this machine only).
      --port PORT            port (default 8000); 0 picks a free port. The URL is printed.
  -o, --output-dir DIR       where models write checkpoints and sampler snapshots (default: a
                             new temporary folder).
      --faults SPEC          answer a share of requests with faults, to test clients, e.g.
                             408:0.1,410:0.05,429:0.1,500:0.1,error:0.05,drop:0.05.
      --seed N               seed of the faults and of models created without one (default 0).
      --threads N            threads of each model's engine (default: the machine's cores);
                             training results are reproducible for a given count.

Exit codes:
  ${EXIT_CODES.ok}    success
  ${EXIT_CODES.invalidRecipe}    the recipe is invalid (file, key path and a suggestion are printed)
  ${EXIT_CODES.usage}    the command line is malformed
  ${EXIT_CODES.runFailed}    the run failed, or asked for something this version cannot do yet
  ${EXIT_CODES.interrupted}  interrupted (Ctrl-C)
`;
}
