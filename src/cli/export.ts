/**
 * `nexrl export RUN_DIR[:STEP]`: a local run's model written in Hugging Face's GPT-2 format and
 * as GGUF; a Tinker run's (or `tinker://` checkpoint's) LoRA adapter in PEFT's format.
 * @module
 */
import { relative } from "node:path";
import { EXIT_CODES } from "./args.js";
import type { ExportCommand } from "./after-run-args.js";
import type { CliIO } from "./io.js";
import { UsageError } from "../errors.js";

/** Runs `nexrl export`: writes the files and prints where they are. */
export async function runExport(command: ExportCommand, io: CliIO): Promise<number> {
  if (command.format === "peft") {
    const { exportPeftAdapter } = await import("../export/peft.js");
    const adapter = await exportPeftAdapter(command.model, {
      cwd: io.cwd,
      env: io.env,
      log: (line) => io.stderr.write(`${line}\n`),
      ...(command.output !== undefined && { outDir: command.output }),
      ...(command.baseModel !== undefined && { baseModel: command.baseModel }),
      ...(command.merge !== undefined && { mergeBase: command.merge }),
    });
    io.stdout.write(
      `nexrl export: LoRA adapter of ${adapter.tinkerPath} (r ${String(adapter.config["r"])}, base ${String(adapter.config["base_model_name_or_path"])}) → ${relative(io.cwd, adapter.dir) || "."}\n` +
        adapter.files.map((f) => `  ${relative(io.cwd, f)}\n`).join("") +
        (adapter.merged
          ? `merged into the base model → ${relative(io.cwd, adapter.merged.dir)}\n` +
            adapter.merged.files.map((f) => `  ${relative(io.cwd, f)}\n`).join("")
          : ""),
    );
    return EXIT_CODES.ok;
  }
  if (command.baseModel !== undefined || command.merge !== undefined)
    throw new UsageError(`${command.merge !== undefined ? "--merge" : "--base-model"} applies to --format peft only`);
  const { exportModel } = await import("../export/index.js");
  const exported = await exportModel(command.model, {
    cwd: io.cwd,
    ...(command.format !== "both" && { formats: [command.format] }),
    ...(command.output !== undefined && { outDir: command.output }),
  });
  io.stdout.write(
    `nexrl export: ${exported.name} (weights of step ${exported.step}) → ${relative(io.cwd, exported.dir) || "."}\n` +
      exported.files.map((f) => `  ${relative(io.cwd, f)}\n`).join(""),
  );
  return EXIT_CODES.ok;
}
