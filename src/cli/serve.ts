/**
 * `nexrl serve`: starts the server and keeps it running until SIGINT or SIGTERM, then removes the
 * temporary folder it made.
 *
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseFaults, startServer, type FaultRates, type RunningServer } from "../server/index.js";
import { defaultMemoryBudgetBytes, megabytes } from "../server/memory-budget.js";
import { DEFAULT_SESSION_TIMEOUT_SECONDS } from "../server/sessions.js";
import { MODEL_PRESETS } from "../engine/config.js";
import { EXIT_CODES, type ServeCommand } from "./args.js";
import type { CliIO } from "./io.js";
import type { RunModel } from "../run-folder/model.js";
import { ConfigError, ListenError, type ListenProblem, UsageError } from "../errors.js";

/** The environment variable holding the API key when `--api-key` is not given. */
export const SERVE_API_KEY_VAR = "NEXRL_SERVE_API_KEY";

const STOP_SIGNALS = ["SIGINT", "SIGTERM"] as const;

/**
 * Resolves on the first SIGINT or SIGTERM. While it waits, other listeners of those signals
 * (such as the CLI's exit on Ctrl-C) are set aside, so the server can close and clean up first.
 */
function stopSignal(): { stopped: Promise<void>; restore: () => void } {
  const previous = STOP_SIGNALS.map((signal) => [signal, process.listeners(signal)] as const);
  let onSignal!: () => void;
  const stopped = new Promise<void>((resolve) => (onSignal = resolve));
  for (const signal of STOP_SIGNALS) {
    process.removeAllListeners(signal);
    process.on(signal, onSignal);
  }
  const restore = (): void => {
    for (const [signal, listeners] of previous) {
      process.removeListener(signal, onSignal);
      for (const listener of listeners) process.on(signal, listener as () => void);
    }
  };
  return { stopped, restore };
}

/** What to do when `nexrl serve` cannot listen, by cause. */
function listenHint(command: ServeCommand): (problem: ListenProblem) => string {
  return (problem) => {
    switch (problem) {
      case "address_in_use":
        return "choose another with --port, or --port 0 for a free one";
      case "permission_denied":
        return "use --port 1024 or above (the default is 8000)";
      case "bad_host":
        return `give --host an address of this machine (127.0.0.1, the default; 0.0.0.0 for every interface) or a host name that resolves to one, not "${command.host}"`;
      case "other":
        return "check --host and --port";
    }
  };
}

/** The error the CLI reports for a server that could not start: a usage error when the flags can never work. */
function startFailure(error: unknown): unknown {
  if (error instanceof ListenError) return error.code === "bad_host" ? new UsageError(error.message) : error;
  if (error instanceof ConfigError) return new UsageError(error.message);
  return error;
}

/**
 * Runs `nexrl serve`: prints the URL, serves until `stop` resolves (by default, until SIGINT or
 * SIGTERM), then closes the server, removes the temporary output folder it made, and returns the
 * exit code.
 * @throws {@link UsageError} for a malformed `--faults` spec, a host that is not this machine's,
 * or a non-loopback host without an API key; a {@link ListenError} when the port is taken or
 * privileged.
 */
export async function runServe(command: ServeCommand, io: CliIO, stop?: Promise<void>): Promise<number> {
  let faults: FaultRates | undefined;
  try {
    faults = command.faults === undefined ? undefined : parseFaults(command.faults);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`--faults: ${error.message}`);
    throw error;
  }
  const apiKey = command.apiKey ?? (io.env[SERVE_API_KEY_VAR] || undefined);
  const runModels = await openRunModels(command, io);
  const sessionTimeoutSeconds = command.sessionTimeoutSeconds ?? DEFAULT_SESSION_TIMEOUT_SECONDS;
  const memoryBudgetBytes =
    command.memoryBudgetMB === undefined ? defaultMemoryBudgetBytes() : command.memoryBudgetMB * 2 ** 20;
  const signals = stop === undefined ? stopSignal() : undefined;
  const temporary = command.outputDir === undefined;
  const outputDir = temporary
    ? await mkdtemp(path.join(tmpdir(), "nexrl-serve-"))
    : path.resolve(io.cwd, command.outputDir!);
  try {
    let server: RunningServer;
    try {
      server = await startServer({
        protocol: command.protocol,
        host: command.host,
        port: command.port,
        outputDir,
        seed: command.seed,
        ...(command.threads !== undefined && { threads: command.threads }),
        sessionTimeoutSeconds,
        memoryBudgetBytes,
        ...(faults && { faults }),
        ...(apiKey !== undefined && { apiKey }),
        ...(command.insecure && { insecure: true }),
        ...(command.tinkerFlags && { tinkerClientConfig: command.tinkerFlags }),
        ...(command.allowedHosts && { allowedHosts: command.allowedHosts }),
        ...(command.corsOrigins && { corsOrigins: command.corsOrigins }),
        listenHint: listenHint(command),
        log: (line) => io.stderr.write(`${line}\n`),
        openaiModels: Object.fromEntries(runModels.map((m) => [m.name, m])),
      });
    } catch (error) {
      throw startFailure(error);
    }
    io.stdout.write(
      `nexrl serve: ${command.protocol === "all" ? "tinker, weaver and openai protocols" : `${command.protocol} protocol`} on ${server.url}\n` +
        `  base models: the local presets (${Object.keys(MODEL_PRESETS).join(", ")}); files in ${outputDir}${temporary ? " (removed on exit)" : ""}\n` +
        runModels
          .map(
            (m) =>
              `  model "${m.name}": ${m.baseModel} weights of step ${m.step} from ${m.source} (/v1/completions, /v1/chat/completions, /v1/responses, /v1/messages)\n`,
          )
          .join("") +
        (apiKey === undefined
          ? "  no API key: any client on this machine may connect\n"
          : "  API key required (X-API-Key, X-WEAVER-API-KEY or Authorization: Bearer)\n") +
        `  sessions expire after ${sessionTimeoutSeconds > 0 ? `${sessionTimeoutSeconds} s without a heartbeat` : "never (--session-timeout 0)"}; ` +
        `memory budget of the models: ${memoryBudgetBytes > 0 ? megabytes(memoryBudgetBytes) : "none (--memory-budget 0)"}\n` +
        (command.faults ? `  faults: ${command.faults} (seed ${command.seed})\n` : "") +
        (command.tinkerFlags
          ? `  tinker client/config flags: ${Object.entries(command.tinkerFlags)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(", ")}\n`
          : "") +
        "  stop with Ctrl-C\n",
    );
    await (stop ?? signals!.stopped);
    await server.close();
    return EXIT_CODES.ok;
  } finally {
    signals?.restore();
    await Promise.all(runModels.map((m) => m.close()));
    if (temporary) await rm(outputDir, { recursive: true, force: true });
  }
}

/**
 * The local run weights of `--model RUN_DIR[:STEP]`, opened for the OpenAI-compatible endpoints.
 * @throws {@link UsageError} when the protocol leaves those endpoints out or two names clash.
 */
async function openRunModels(command: ServeCommand, io: CliIO): Promise<RunModel[]> {
  if (!command.models?.length) return [];
  if (command.protocol !== "openai" && command.protocol !== "all")
    throw new UsageError(
      `--model serves on the OpenAI-compatible endpoints; use --protocol openai or all, not ${command.protocol}`,
    );
  const { openRunModel } = await import("../run-folder/model.js");
  const models: RunModel[] = [];
  try {
    for (const ref of command.models) {
      const model = await openRunModel(ref, { cwd: io.cwd, env: io.env, localOnly: true, engineHosts: true });
      models.push(model);
      if (models.some((m) => m !== model && m.name === model.name))
        throw new UsageError(
          `two --model arguments are both named "${model.name}"; serve different run folders or steps`,
        );
    }
  } catch (error) {
    await Promise.all(models.map((m) => m.close()));
    throw error;
  }
  return models;
}
