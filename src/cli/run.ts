import path from "node:path";
import { resolveRunDirectory } from "../outputs/run-dir.js";
import type { LoadedRecipe } from "../recipe/load.js";
import { redactSecrets, redactText, secretRedactor } from "../recipe/redact.js";
import { EXIT_CODES, parseCommandLine } from "./args.js";
import { commandHelp, helpText } from "./help.js";
import { NexrlError, RecipeError, RolloutError, RunError, UsageError, UserCodeError } from "../errors.js";
import { provideBuiltins } from "../builtins.js";
import type { CliIO } from "./io.js";

// The recipe loader (zod, tsx), the pipeline, yaml and the server are imported by the commands
// that use them: loading them up front made `nexrl --help` take several times Node's own start.

/**
 * Runs the `nexrl` command line and returns the process exit code (see `EXIT_CODES`).
 * Never throws for expected failures: they are printed to `io.stderr`. Everything it prints has
 * the secrets of the environment, and once it is loaded of the recipe, redacted.
 */
// The CLI plugs the agent service into the pipeline and offers the package root to CommonJS user modules.
provideBuiltins(() => import("../index.js"));

export async function runCli(argv: readonly string[], cliIO: CliIO): Promise<number> {
  let redact = (text: string): string => redactText(text, cliIO.env);
  const io: CliIO = {
    ...cliIO,
    stdout: {
      write: (text: string) => cliIO.stdout.write(redact(text)),
      ...(cliIO.stdout.isTTY !== undefined && { isTTY: cliIO.stdout.isTTY }),
    },
    stderr: { write: (text: string) => cliIO.stderr.write(redact(text)) },
  };
  const loadRedacting = async (configPath: string, overrides: string[]): Promise<LoadedRecipe> => {
    const recipe = await load(configPath, overrides, io);
    redact = secretRedactor(recipe.config, io.env);
    return recipe;
  };
  // NEXRL_DEBUG=1 (any value but 0 or false) asks for whole stacks, as --verbose does.
  const debug = io.env.NEXRL_DEBUG;
  let verbose = debug !== undefined && !["", "0", "false"].includes(debug.toLowerCase());
  try {
    const command = parseCommandLine(argv);
    if ("verbose" in command && command.verbose) verbose = true;
    switch (command.kind) {
      case "help":
        io.stdout.write(
          command.command === undefined ? helpText(io.version) : commandHelp(command.command, io.version),
        );
        return EXIT_CODES.ok;
      case "version":
        io.stdout.write(`${io.version}\n`);
        return EXIT_CODES.ok;
      case "serve":
        return await (await import("./serve.js")).runServe(command, io);
      case "worker":
        return await (await import("./worker.js")).runWorker(command, io, loadRedacting);
      case "report":
        return await (await import("./report.js")).runReport(command, io);
      case "sample":
        return await (await import("./sample.js")).runSample(command, io);
      case "export":
        return await (await import("./export.js")).runExport(command, io);
      case "checkpoints":
        return await (await import("./checkpoints.js")).runCheckpoints(command, io);
      case "validate":
        return await validate(await loadRedacting(command.configPath, command.overrides), io);
      case "run": {
        if (command.mode === "self-hosted") {
          throw new UsageError(
            "self-hosted mode is not supported: nexrl trains through training services and runs no GPU cluster of its own. " +
              "Use -m training-service with service.train_service.backend set to local (the embedded CPU engine), tinker or weaver.",
          );
        }
        const recipe = await loadRedacting(command.configPath, command.overrides);
        const outputDir = resolveOutputDir(command.tag, command.outputDir, io);
        if (!command.runNexrl) {
          const { stringify } = await import("yaml");
          io.stdout.write(`# resolved recipe (${recipe.path})\n${stringify(redactSecrets(recipe.config, io.env))}\n`);
          io.stdout.write(formatPlan(recipe, outputDir));
          io.stdout.write("\nNothing was run. Add --run-nexrl to train.\n");
          return EXIT_CODES.ok;
        }
        // A training run writes the resolved recipe to config.resolved.yaml; the console gets the plan.
        io.stdout.write(formatPlan(recipe, outputDir));
        return await train(recipe, outputDir, io);
      }
    }
  } catch (error) {
    const code = reportFailure(error, io);
    if (verbose && !(error instanceof UsageError)) io.stderr.write(`\n${errorChain(error)}\n`);
    return code;
  }
}

/** An error's whole stack and those of its causes, for `--verbose`. */
function errorChain(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && depth < 8; depth++) {
    const text = e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e);
    parts.push(depth === 0 ? text : `Caused by: ${text}`);
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join("\n");
}

/**
 * `nexrl validate`: the checks a run makes before its first rollout, as a dry run (nothing is
 * downloaded, started or written). A recipe the run would refuse exits {@link EXIT_CODES.invalidRecipe}.
 */
async function validate(recipe: LoadedRecipe, io: CliIO): Promise<number> {
  const { checkRecipe } = await import("../run/preflight.js");
  let notes: string[];
  try {
    notes = await checkRecipe(recipe, io.cwd, io.env);
  } catch (error) {
    if (!(error instanceof NexrlError) || error instanceof RecipeError) throw error;
    io.stderr.write(`nexrl: the recipe loads, but a run of it would fail at start-up:\n${error.message}\n`);
    return EXIT_CODES.invalidRecipe;
  }
  io.stdout.write(
    `recipe ok: ${recipe.path}\n  composed from: ${recipe.files.map((f) => path.relative(io.cwd, f) || f).join(", ")}\n`,
  );
  for (const note of notes) io.stdout.write(`  note: ${note}\n`);
  return EXIT_CODES.ok;
}

/** Prints why the command failed (one line, or the recipe's problems) and returns its exit code. */
function reportFailure(error: unknown, io: CliIO): number {
  if (error instanceof UsageError) {
    io.stderr.write(`nexrl: ${error.message}\n`);
    return EXIT_CODES.usage;
  }
  if (error instanceof RecipeError) {
    io.stderr.write(`nexrl: invalid recipe\n${error.message}\n`);
    return EXIT_CODES.invalidRecipe;
  }
  if (error instanceof NexrlError) {
    io.stderr.write(`nexrl: ${error.message}\n`);
    return exitCodeOf(error);
  }
  const errno = error as NodeJS.ErrnoException;
  if (error instanceof Error && typeof errno.code === "string" && typeof errno.syscall === "string") {
    // A file-system error nothing turned into a message of its own: the cause in one line.
    io.stderr.write(`nexrl: ${error.message}\n`);
    return EXIT_CODES.runFailed;
  }
  io.stderr.write(
    `nexrl: unexpected error (a bug in nexrl, or in code it ran)\n${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  return EXIT_CODES.runFailed;
}

/** The exit code of one of nexrl's errors. */
function exitCodeOf(error: NexrlError): number {
  if (error instanceof RunError && (error.code === "output_dir" || error.code === "locked"))
    return EXIT_CODES.outputDir;
  if (error instanceof RunError && error.code === "no_successful_rollout") return EXIT_CODES.noRolloutSucceeded;
  if (
    (error instanceof RunError && error.code === "stalled") ||
    (error instanceof RolloutError && error.cause instanceof UserCodeError && error.cause.code === "hung")
  )
    return EXIT_CODES.hung;
  return EXIT_CODES.runFailed;
}

async function load(configPath: string, overrides: string[], io: CliIO): Promise<LoadedRecipe> {
  const { loadRecipe } = await import("../recipe/load.js");
  return loadRecipe(path.resolve(io.cwd, configPath), { overrides, env: io.env, cwd: io.cwd });
}

/** `--output-dir`, else `<NEXRL_STORAGE_PATH or ./runs>/<tag or UTC time>` under the current folder. */
function resolveOutputDir(tag: string | undefined, outputDir: string | undefined, io: CliIO): string {
  return resolveRunDirectory({
    ...(tag !== undefined && { tag }),
    ...(outputDir !== undefined && { outputDir }),
    env: io.env,
    cwd: io.cwd,
  });
}

/** The signals a run stops on, and the exit code of each. */
const STOP_SIGNALS = { SIGINT: EXIT_CODES.interrupted, SIGTERM: EXIT_CODES.terminated } as const;

/**
 * Trains with `runRecipe`, printing progress to stdout. The first Ctrl-C (SIGINT) or SIGTERM
 * stops after the step in flight and saves a checkpoint (exit 130 or 143); a second signal quits
 * at once.
 */
async function train(recipe: LoadedRecipe, outputDir: string, io: CliIO): Promise<number> {
  const controller = new AbortController();
  let received: keyof typeof STOP_SIGNALS | undefined;
  const handlers = (Object.keys(STOP_SIGNALS) as Array<keyof typeof STOP_SIGNALS>).map((name) => {
    const handler = (): void => {
      if (controller.signal.aborted) process.exit(STOP_SIGNALS[received ?? name]);
      received = name;
      io.stderr.write(
        `\nnexrl: ${name === "SIGINT" ? "Ctrl-C" : "SIGTERM"}: stopping after the current step and saving a checkpoint (${name === "SIGINT" ? "Ctrl-C again" : "a second signal"} to quit now)\n`,
      );
      controller.abort();
    };
    const previous = process.listeners(name);
    process.removeAllListeners(name);
    process.on(name, handler);
    return { name, handler, previous };
  });
  try {
    const { runRecipe } = await import("../run/run-recipe.js");
    const result = await runRecipe(recipe, {
      outputDir,
      signal: controller.signal,
      progress: io.stdout,
      env: io.env,
      cwd: io.cwd,
    });
    return result.stopReason === "aborted" ? STOP_SIGNALS[received ?? "SIGINT"] : EXIT_CODES.ok;
  } finally {
    for (const { name, handler, previous } of handlers) {
      process.removeListener(name, handler);
      for (const listener of previous) process.on(name, listener as () => void);
    }
  }
}

function formatPlan(recipe: LoadedRecipe, outputDir: string): string {
  const { config } = recipe;
  const train = config.service.train_service;
  const lines = [
    "# plan",
    `backend:        ${train.backend} (model ${train.model})`,
    `rollout worker: ${config.rollout_worker.type} × ${config.rollout_worker.num_workers}`,
    `trainer:        ${config.trainer.type}, ${config.trainer.total_train_steps} steps`,
    `data:           ${(config.data.data_files ?? []).join(", ")} (batch ${config.data.batch_size})`,
    `weight sync:    ${config.weight.sync_mode}`,
    ...(config.init == null
      ? []
      : [
          `warm start:     ${config.init.from_recipe !== undefined ? `run ${config.init.from_recipe} first (or reuse its run)` : `the weights of ${config.init.from_checkpoint}`}, unless the run resumes`,
        ]),
    `output dir:     ${outputDir} (resolved recipe: config.resolved.yaml)`,
  ];
  return `${lines.join("\n")}\n`;
}
