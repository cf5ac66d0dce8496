/**
 * `exportModel`: a local run's trained model written in standard formats, for use outside nexrl.
 * @module
 * @internal
 */
import { basename, join, resolve } from "node:path";
import { resolveModelConfig } from "../engine/config.js";
import { parameterCount } from "../engine/params.js";
import { readStateFile } from "../engine/storage.js";
import { ByteTokenizer } from "../engine/tokenizer.js";
import { pickWeights, parseRunModelRef, type RunModelRef } from "../run-folder/model.js";
import { configValue, readRunFolder } from "../run-folder/read.js";
import { readRunWeights } from "../run-folder/weights.js";
import { appendAll } from "../wire/arrays.js";
import { RunError } from "../errors.js";
import { writeHuggingFace } from "./hugging-face.js";
import { writeGguf } from "./llama-cpp.js";

/**
 * A format {@link exportModel} writes: `hf` is Hugging Face's GPT-2 (`config.json`,
 * `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`), `gguf` is llama.cpp's
 * `model.gguf`.
 */
export type ExportFormat = "hf" | "gguf";

/** Every {@link ExportFormat}, in the order {@link exportModel} writes them. */
export const EXPORT_FORMATS: readonly ExportFormat[] = ["hf", "gguf"];

/** Options of {@link exportModel}. */
export interface ExportModelOptions {
  /** The formats to write (default: all of {@link EXPORT_FORMATS}). */
  formats?: readonly ExportFormat[];
  /** The folder to write into, created when missing (default: `RUN_DIR/export/step_NNNNNN`). */
  outDir?: string;
  /** Folder a relative run folder and `outDir` are found from (default: the current directory). */
  cwd?: string;
}

/** What {@link exportModel} wrote. */
export interface ExportedModel {
  /** `<run folder name>:<step>`. */
  name: string;
  /** The step of the weights. */
  step: number;
  /** The weights file read. */
  source: string;
  /** The folder written into. */
  dir: string;
  /** The files written. */
  files: string[];
}

/**
 * Writes the model of a local run (`RUN_DIR[:step]`, the latest weights by default) in Hugging
 * Face's GPT-2 format (`config.json`, `model.safetensors` (F32), `tokenizer.json` and
 * `tokenizer_config.json` with the byte tokenizer's chat template) and as llama.cpp's
 * `model.gguf` (GGUF v3, architecture `gpt2`, F32, with the tokenizer and chat template), or
 * only the `formats` asked for.
 * @throws {@link "nexrl/errors".RunError | RunError} for a missing folder or step, or a run on a remote backend.
 */
export async function exportModel(ref: RunModelRef | string, options: ExportModelOptions = {}): Promise<ExportedModel> {
  const { dir, step } = typeof ref === "string" ? parseRunModelRef(ref) : ref;
  const cwd = options.cwd ?? process.cwd();
  const run = await readRunFolder(dir, { cwd });
  const backend = configValue(run.config, "service.train_service.backend");
  if (backend !== "local")
    throw new RunError(
      `${run.dir} trained on ${String(backend)}: only runs of the local engine (backend: local) can be exported; a remote service's weights are downloaded from that service`,
      { code: "run_folder" },
    );
  const { checkpoints, snapshots } = await readRunWeights(run);
  const picked = pickWeights(run, checkpoints, snapshots, step);
  const source = picked.checkpoint?.trainingState ?? picked.snapshot!.file;
  const at = picked.checkpoint?.step ?? picked.snapshot!.step;
  const contents = await readStateFile(source);
  const config = resolveModelConfig(contents.config, new ByteTokenizer().vocabSize);
  if (parameterCount(config) !== contents.weights.length)
    throw new RunError(
      `${source} holds ${contents.weights.length} weights, its config needs ${parameterCount(config)}`,
      { code: "run_folder" },
    );
  const name = `${basename(run.dir)}:${at}`;
  const outDir =
    options.outDir === undefined
      ? join(run.dir, "export", `step_${String(at).padStart(6, "0")}`)
      : resolve(cwd, options.outDir);
  const metadata = { "nexrl.run": name, "nexrl.step": String(at) };
  const formats = options.formats ?? EXPORT_FORMATS;
  const files: string[] = [];
  if (formats.includes("hf")) appendAll(files, await writeHuggingFace(outDir, config, contents.weights, metadata));
  if (formats.includes("gguf")) files.push(await writeGguf(outDir, config, contents.weights, name, metadata));
  return { name, step: at, source, dir: outDir, files };
}
