import { parseArgs } from "node:util";
import { parseTinkerFlag } from "../server/tinker-flags.js";
import { parseReport, parseSample, type ReportCommand, type SampleCommand } from "./after-run-args.js";
import { corsOrigin } from "./cors-origin.js";
import { ConfigError, UsageError } from "../errors.js";

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
  | { kind: "help" }
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
  | SampleCommand;

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
  /** More host names requests may be addressed to (`--allow-host`). */
  allowedHosts?: string[];
  /** Origins whose browser requests are served (`--cors`). */
  corsOrigins?: string[];
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
        "api-key": { type: "string" },
        insecure: { type: "boolean" },
        "tinker-flag": { type: "string", multiple: true },
        model: { type: "string", multiple: true },
        threads: { type: "string" },
        "allow-host": { type: "string", multiple: true },
        cors: { type: "string", multiple: true },
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
  if (values["api-key"] !== undefined && values["api-key"].trim() === "")
    throw new UsageError("--api-key is empty; give the key clients must send (or set NEXRL_SERVE_API_KEY)");
  let tinkerFlags: Record<string, boolean | number | string> | undefined;
  for (const spec of values["tinker-flag"] ?? []) {
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
    throw new UsageError(`--threads must be an integer from 1 to 256, got "${values.threads}"`);
  return {
    kind: "serve",
    protocol: protocol as ServeCommand["protocol"],
    host: values.host ?? "127.0.0.1",
    port,
    seed,
    ...(values["output-dir"] !== undefined && { outputDir: values["output-dir"] }),
    ...(values.faults !== undefined && { faults: values.faults }),
    ...(values["api-key"] !== undefined && { apiKey: values["api-key"] }),
    ...(values.insecure && { insecure: true }),
    ...(tinkerFlags && { tinkerFlags }),
    ...(values.model !== undefined && { models: values.model }),
    ...(threads !== undefined && { threads }),
    ...(values["allow-host"] !== undefined && { allowedHosts: values["allow-host"] }),
    ...(values.cors !== undefined && { corsOrigins: values.cors.map((o) => corsOrigin(o)) }),
  };
}

const OVERRIDE = /^\+?[A-Za-z_][\w-]*(\.[\w-]+)*=/;

/** Parses the arguments of `nexrl worker`. */
function parseWorker(argv: readonly string[]): CliCommand {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        "train-config": { type: "string", short: "c" },
        config: { type: "string" },
        redis: { type: "string" },
        concurrency: { type: "string" },
        name: { type: "string" },
        verbose: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nRun \`nexrl --help\` for the options.`);
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: "help" };
  const bad = positionals.find((p) => !OVERRIDE.test(p));
  if (bad !== undefined)
    throw new UsageError(
      `unexpected argument "${bad}"; overrides look like key.path=value (e.g. rollout_worker.num_workers=8)`,
    );
  const configPath = values["train-config"] ?? values.config;
  if (!configPath) throw new UsageError("no recipe given; pass the run's recipe with -c/--train-config PATH");
  let concurrency: number | undefined;
  if (values.concurrency !== undefined) {
    concurrency = Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new UsageError(`--concurrency must be a whole number of at least 1, not "${values.concurrency}"`);
  }
  return {
    kind: "worker",
    configPath,
    overrides: positionals,
    ...(values.redis !== undefined && { redis: values.redis }),
    ...(concurrency !== undefined && { concurrency }),
    ...(values.name !== undefined && { name: values.name }),
    ...(values.verbose && { verbose: true as const }),
  };
}

/** Parses `argv` (without the node and script entries) into a {@link CliCommand}. */
export function parseCommandLine(argv: readonly string[]): CliCommand {
  const [first, ...rest] = argv;
  if (first === "serve") return parseServe(rest);
  if (first === "report") return parseReport(rest);
  if (first === "sample") return parseSample(rest);
  if (first === "worker") return parseWorker(rest);
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
        verbose: { type: "boolean" },
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
  const verbose = values.verbose ? { verbose: true as const } : {};
  if (subcommand === "validate") return { kind: "validate", configPath, overrides, ...verbose };
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
    ...verbose,
  };
}

/** The text of `nexrl --help`. */
export function helpText(version: string): string {
  return `nexrl ${version} — post-train LLMs and agents with RL and SFT

Usage:
  nexrl -m training-service -c RECIPE [--run-nexrl] [--tag TAG] [--output-dir DIR] [--verbose] [key.path=value ...]
  nexrl validate -c RECIPE [--verbose] [key.path=value ...]
  nexrl serve [--protocol tinker|weaver|openai|all] [--host HOST] [--port PORT] [--output-dir DIR]
              [--faults SPEC] [--seed N] [--threads N] [--api-key KEY] [--insecure]
              [--tinker-flag KEY=VALUE ...] [--model RUN_DIR[:STEP] ...]
              [--allow-host NAME ...] [--cors ORIGIN ...]
  nexrl worker -c RECIPE [--redis URL] [--concurrency N] [--name NAME] [key.path=value ...]
  nexrl report RUN_DIR [-o report.html] [--open] [--watch [--port PORT] [--allow-host NAME] [--cors ORIGIN]]
  nexrl sample RUN_DIR[:STEP] [PROMPT] [--chat] [-n N] [--temperature T] [--max-tokens M]
               [--logprobs] [--json] [--seed N]

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
      --verbose              on failure, print the whole stack and the chain of causes (also
                             with the environment variable NEXRL_DEBUG=1).
  -h, --help                 this text.
  -v, --version              the version.
  key.path=value             override a recipe key, e.g. trainer.total_train_steps=10.

Commands:
  validate                   a dry run of the checks a run makes before its first rollout (modules,
                             model, tokenizer, reward, lengths, data); exit 1 if a run would fail.
  serve                      serve the local engine over the Tinker, Weaver and OpenAI-compatible
                             protocols until stopped (Ctrl-C), so tinker/weaver recipes run
                             without a remote service.
  worker                     run the rollouts of a run whose recipe sets rollout_worker.distributed:
                             takes tasks from its Redis server until stopped (SIGTERM or Ctrl-C
                             hands back the tasks in flight and exits 0).
  report                     write a run folder's report: one HTML file (summary, a chart per
                             metric, rollouts token by token, checkpoints, configuration).
  sample                     sample from a run's trained weights (the latest checkpoint, or
                             STEP); prompts from PROMPT or standard input, one per line.

Serve options:
  -p, --protocol PROTOCOL    tinker, weaver, openai (/v1/completions, /v1/chat/completions,
                             /v1/messages) or all (the default).
      --host HOST            interface to bind (default 127.0.0.1: this machine only). Another
                             address needs --api-key (or --insecure).
      --port PORT            port (default 8000); 0 picks a free port. The URL is printed.
  -o, --output-dir DIR       where models write checkpoints and sampler snapshots (default: a
                             new temporary folder, removed when the server stops).
      --faults SPEC          answer a share of requests with faults, to test clients, e.g.
                             408:0.1,410:0.05,429:0.1,500:0.1,error:0.05,drop:0.05.
      --seed N               seed of the faults and of models created without one (default 0).
      --threads N            threads of each model's engine (default: the machine's cores);
                             training results are reproducible for a given count.
      --api-key KEY          every request but /health must carry KEY in X-API-Key,
                             X-WEAVER-API-KEY or Authorization: Bearer (else 401). The
                             environment variable NEXRL_SERVE_API_KEY sets it without showing it
                             in the process list.
      --insecure             serve a non-loopback --host without an API key.
      --tinker-flag KEY=VALUE
                             a flag the Tinker protocol's client/config answers (repeatable), e.g.
                             proto_write_fwdbwd=true (SDK 0.19-0.24 then write protobuf),
                             pjwt_auth_enabled=true (JWTs from /api/v1/auth/token), or
                             use_pyqwest_transport=false (the SDK uses httpx's transport).
      --model RUN_DIR[:STEP] also serve a local run's weights (its latest checkpoint, or STEP) on
                             /v1/completions, /v1/chat/completions and /v1/messages as model
                             "<run>:<step>"; repeat for more runs.
      --allow-host NAME      also answer requests addressed to NAME (a proxy's or container's
                             host name; repeatable). Others get 403, so that no web page can
                             point its own name at this machine and read the answers.
      --cors ORIGIN          serve browser requests from the web page origin ORIGIN (e.g.
                             http://localhost:3000, or *), with CORS headers; repeatable. Other
                             cross-origin requests get 403, and bodies must be JSON or protobuf.
  The server stops on Ctrl-C or SIGTERM (exit 0). A --host that is not this machine's exits 2;
  a port in use or a privileged port exits 3.

Worker options:
  -c, --train-config PATH    the run's recipe: the worker loads its rollout worker (and agent).
      --redis URL            the Redis server (default: rollout_worker.distributed.url);
                             redis://[[user]:password@]host[:port][/db], rediss:// for TLS.
      --concurrency N        rollouts at once (default: rollout_worker.num_workers).
      --name NAME            the worker's name in the driver's metrics (default: host-pid).

Report options:
  -o, --output FILE          the HTML file (default: RUN_DIR/report.html).
      --open                 open it in the browser (xdg-open, open or start).
  -w, --watch                serve the report on 127.0.0.1 instead, redrawn as the run writes
                             more, until Ctrl-C; --port PORT (default: a free one, printed),
                             --interval MS between checks (default 2000); --allow-host and
                             --cors as for serve.

Sample options:
      --chat                 send each prompt as a user message through the chat template.
  -n N                       completions per prompt (default 1).
  -t, --temperature T        0 is greedy (default: the recipe's rollout_worker.temperature).
  -m, --max-tokens M         most tokens per completion (default: the recipe's
                             rollout_worker.max_response_length, else 256).
      --logprobs             print each generated token with its logprob.
      --json                 one JSON object per completion (prompt, text, tokens, logprobs).
      --seed N               sampling seed.

Exit codes:
  ${EXIT_CODES.ok}    success
  ${EXIT_CODES.invalidRecipe}    the recipe is invalid (file, key path and a suggestion are printed)
  ${EXIT_CODES.usage}    the command line is malformed
  ${EXIT_CODES.runFailed}    the run failed, or asked for something this version cannot do yet
  ${EXIT_CODES.outputDir}    the output folder cannot be written, or another run is using it
  ${EXIT_CODES.noRolloutSucceeded}    a training step had no successful rollout (see failures.jsonl)
  ${EXIT_CODES.hung}    the run hung: user code never settled and nothing could progress
  ${EXIT_CODES.interrupted}  interrupted (Ctrl-C): the step in flight finished, a checkpoint was saved
  ${EXIT_CODES.terminated}  terminated (SIGTERM): as for Ctrl-C
`;
}
