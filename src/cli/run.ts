import path from "node:path";
import { resolveRunDirectory } from "../pipeline/run-dir.js";
import { RecipeError } from "../recipe/errors.js";
import type { LoadedRecipe } from "../recipe/load.js";
import { redactSecrets } from "../recipe/redact.js";
import { NexrlError } from "../types/errors.js";
import { EXIT_CODES, UsageError, helpText, parseCommandLine } from "./args.js";

// The recipe loader (zod, tsx), the pipeline, yaml and the server are imported by the commands
// that use them: loading them up front made `nexrl --help` take several times Node's own start.

/** Where the CLI reads and writes; the real process in `main.ts`, buffers in tests. */
export interface CliIO {
  /** Receives results: help, the resolved recipe, the plan. */
  stdout: { write(text: string): unknown };
  /** Receives errors and warnings. */
  stderr: { write(text: string): unknown };
  /** Environment for `${oc.env:...}` and for secret redaction. */
  env: Record<string, string | undefined>;
  /** Folder relative paths resolve from. */
  cwd: string;
  /** The package version. */
  version: string;
  /** Where `nexrl sample` reads prompts when none is given (default: the process's standard input). */
  stdin?: AsyncIterable<string | Buffer> & { isTTY?: boolean };
}

/**
 * Runs the `nexrl` command line and returns the process exit code (see `EXIT_CODES`).
 * Never throws for expected failures: they are printed to `io.stderr`.
 */
export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  try {
    const command = parseCommandLine(argv);
    switch (command.kind) {
      case "help":
        io.stdout.write(helpText(io.version));
        return EXIT_CODES.ok;
      case "version":
        io.stdout.write(`${io.version}\n`);
        return EXIT_CODES.ok;
      case "serve":
        return await (await import("./serve.js")).runServe(command, io);
      case "report":
        return await (await import("./report.js")).runReport(command, io);
      case "sample":
        return await (await import("./sample.js")).runSample(command, io);
      case "validate": {
        const recipe = await load(command.configPath, command.overrides, io);
        io.stdout.write(
          `recipe ok: ${recipe.path}\n  composed from: ${recipe.files.map((f) => path.relative(io.cwd, f) || f).join(", ")}\n`,
        );
        return EXIT_CODES.ok;
      }
      case "run": {
        if (command.mode === "self-hosted") {
          throw new UsageError(
            "self-hosted mode is not supported: nexrl trains through training services and runs no GPU cluster of its own. " +
              "Use -m training-service with service.train_service.backend set to local (the embedded CPU engine), tinker or weaver.",
          );
        }
        const recipe = await load(command.configPath, command.overrides, io);
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
      return EXIT_CODES.runFailed;
    }
    io.stderr.write(
      `nexrl: unexpected error\n${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    return EXIT_CODES.runFailed;
  }
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

/**
 * Trains with `runRecipe`, printing progress to stdout. The first Ctrl-C stops after the step in
 * flight and saves a checkpoint (exit 130); a second one quits at once.
 */
async function train(recipe: LoadedRecipe, outputDir: string, io: CliIO): Promise<number> {
  const controller = new AbortController();
  const onInterrupt = (): void => {
    if (controller.signal.aborted) process.exit(EXIT_CODES.interrupted);
    io.stderr.write("\nnexrl: stopping after the current step and saving a checkpoint (Ctrl-C again to quit now)\n");
    controller.abort();
  };
  const previous = process.listeners("SIGINT");
  process.removeAllListeners("SIGINT");
  process.on("SIGINT", onInterrupt);
  try {
    const { runRecipe } = await import("../pipeline/run-recipe.js");
    const result = await runRecipe(recipe, {
      outputDir,
      signal: controller.signal,
      progress: io.stdout,
      env: io.env,
      cwd: io.cwd,
    });
    return result.stopReason === "aborted" ? EXIT_CODES.interrupted : EXIT_CODES.ok;
  } finally {
    process.removeListener("SIGINT", onInterrupt);
    for (const listener of previous) process.on("SIGINT", listener as () => void);
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
    `output dir:     ${outputDir} (resolved recipe: config.resolved.yaml)`,
  ];
  return `${lines.join("\n")}\n`;
}
