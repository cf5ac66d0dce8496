/**
 * `nexrl serve`: starts the server and keeps it running until SIGINT or SIGTERM.
 *
 * @module
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { FaultSpecError, parseFaults, startServer, type FaultRates, type RunningServer } from "../server/index.js";
import { MODEL_PRESETS } from "../engine/config.js";
import { NexrlError } from "../types/errors.js";
import { EXIT_CODES, UsageError, type ServeCommand } from "./args.js";
import type { CliIO } from "./run.js";

/** Resolves on the first SIGINT or SIGTERM. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}

/**
 * Runs `nexrl serve`: prints the URL, serves until `stop` resolves (by default, until SIGINT or
 * SIGTERM), then closes the server and returns the exit code.
 * @throws {@link UsageError} for a malformed `--faults` spec; a {@link NexrlError} when the port is taken.
 */
export async function runServe(command: ServeCommand, io: CliIO, stop?: Promise<void>): Promise<number> {
  let faults: FaultRates | undefined;
  try {
    faults = command.faults === undefined ? undefined : parseFaults(command.faults);
  } catch (error) {
    if (error instanceof FaultSpecError) throw new UsageError(`--faults: ${error.message}`);
    throw error;
  }
  const outputDir = command.outputDir
    ? path.resolve(io.cwd, command.outputDir)
    : await mkdtemp(path.join(tmpdir(), "nexrl-serve-"));
  let server: RunningServer;
  try {
    server = await startServer({
      protocol: command.protocol,
      host: command.host,
      port: command.port,
      outputDir,
      seed: command.seed,
      ...(command.threads !== undefined && { threads: command.threads }),
      ...(faults && { faults }),
      log: (line) => io.stderr.write(`${line}\n`),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
      throw new NexrlError(
        `port ${command.port} on ${command.host} is already in use; choose another with --port, or --port 0 for a free one`,
      );
    }
    throw error;
  }
  io.stdout.write(
    `nexrl serve: ${command.protocol === "all" ? "tinker, weaver and openai protocols" : `${command.protocol} protocol`} on ${server.url}\n` +
      `  base models: the local presets (${Object.keys(MODEL_PRESETS).join(", ")}); files in ${outputDir}\n` +
      (command.faults ? `  faults: ${command.faults} (seed ${command.seed})\n` : "") +
      "  stop with Ctrl-C\n",
  );
  await (stop ?? stopSignal());
  await server.close();
  return EXIT_CODES.ok;
}
