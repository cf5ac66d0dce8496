import path from "node:path";
import { stringify } from "yaml";
import { loadRecipe, redactSecrets, RecipeError, type LoadedRecipe } from "../recipe/index.js";
import { NexrlError } from "../types/errors.js";
import { EXIT_CODES, UsageError, helpText, parseCommandLine } from "./args.js";
import { runServe } from "./serve.js";

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
}

/** Thrown when a recipe asks for something this version of nexrl cannot do yet. */
export class NotAvailableError extends NexrlError {}

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
        return await runServe(command, io);
      case "validate": {
        const recipe = await load(command.configPath, command.overrides, io);
        io.stdout.write(`recipe ok: ${recipe.path}\n  composed from: ${recipe.files.map((f) => path.relative(io.cwd, f) || f).join(", ")}\n`);
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
        const outputDir = resolveOutputDir(recipe, command.tag, command.outputDir, io.cwd);
        io.stdout.write(`# resolved recipe (${recipe.path})\n${stringify(redactSecrets(recipe.config, io.env))}\n`);
        io.stdout.write(formatPlan(recipe, outputDir));
        if (!command.runNexrl) {
          io.stdout.write("\nNothing was run. Add --run-nexrl to train.\n");
          return EXIT_CODES.ok;
        }
        throw new NotAvailableError(
          "training is not available yet in this version of nexrl: the training pipeline (runRecipe) has not landed. " +
            "The recipe above is valid; `nexrl validate -c` checks recipes in the meantime.",
        );
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
    io.stderr.write(`nexrl: unexpected error\n${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT_CODES.runFailed;
  }
}

function load(configPath: string, overrides: string[], io: CliIO): Promise<LoadedRecipe> {
  return loadRecipe(path.resolve(io.cwd, configPath), { overrides, env: io.env, cwd: io.cwd });
}

/** `--output-dir`, else `outputs/<experiment_name>/<tag or UTC time>` under the current folder. */
function resolveOutputDir(recipe: LoadedRecipe, tag: string | undefined, outputDir: string | undefined, cwd: string): string {
  if (outputDir) return path.resolve(cwd, outputDir);
  const runName = tag ?? new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "").replace("T", "-");
  return path.resolve(cwd, "outputs", recipe.config.experiment_name, runName);
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
    `output dir:     ${outputDir}`,
  ];
  return `${lines.join("\n")}\n`;
}
