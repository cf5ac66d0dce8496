/**
 * `nexrl export RUN_DIR[:STEP]`: a local run's model written in Hugging Face's GPT-2 format and
 * as GGUF.
 * @module
 */
import { relative } from "node:path";
import { EXIT_CODES } from "./args.js";
import type { ExportCommand } from "./after-run-args.js";
import type { CliIO } from "./io.js";

/** Runs `nexrl export`: writes the files and prints where they are. */
export async function runExport(command: ExportCommand, io: CliIO): Promise<number> {
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
