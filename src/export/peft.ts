/**
 * `exportPeftAdapter`: a Tinker run's LoRA adapter (or one `tinker://` checkpoint's) downloaded
 * from its service and written in PEFT's format, for `peft` and vLLM's `--lora-modules`.
 * @module
 */
import { join, resolve } from "node:path";
import { remoteCheckpoints, type RecordedCheckpoint } from "../run-folder/remote-checkpoints.js";
import { peftFromTinkerAdapter } from "../formats/lora-adapter.js";
import { readTar } from "../formats/tar.js";
import { writeFiles } from "./write-files.js";
import { RunError } from "../errors.js";

/** Options of {@link exportPeftAdapter}. */
export interface ExportPeftOptions {
  /** The folder to write into (default: `RUN_DIR/export/step_NNNNNN-peft`, or `<run>-<name>-peft` for a path). */
  outDir?: string;
  /** Folder a relative run folder and `outDir` are found from (default: the current directory). */
  cwd?: string;
  /** Environment: `TINKER_API_KEY` and `TINKER_BASE_URL`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** `base_model_name_or_path` of the adapter (default: what the checkpoint's adapter names). */
  baseModel?: string;
  /** Receives the service's retry warnings. */
  log?: (line: string) => void;
  /** A base model folder (Hugging Face safetensors, F32 or BF16) to merge the adapter into, written to `<outDir>/merged`. */
  mergeBase?: string;
}

/** What {@link exportPeftAdapter} wrote. */
export interface ExportedPeftAdapter {
  /** The checkpoint downloaded. */
  tinkerPath: string;
  /** Its step, for a run's checkpoint. */
  step: number | undefined;
  /** The folder written into. */
  dir: string;
  /** `adapter_config.json` and `adapter_model.safetensors`. */
  files: string[];
  /** The adapter's config as written. */
  config: Record<string, unknown>;
  /** The merged model's folder and files, with `mergeBase`. */
  merged?: { dir: string; files: string[] };
}

/** The checkpoint of a step to take the adapter from: its sampler when it holds that step, else its training state. */
function pick(checkpoints: RecordedCheckpoint[]): RecordedCheckpoint {
  const last = checkpoints.at(-1)!;
  const atStep = checkpoints.filter((c) => c.step === last.step);
  return atStep.find((c) => c.role === "sampler") ?? atStep[0]!;
}

/**
 * Downloads the archive of a Tinker checkpoint — `target` is `RUN_DIR[:STEP]` of a run on the
 * `tinker` backend (the latest step by default) or a `tinker://` path — and writes its LoRA
 * adapter as `adapter_config.json` + `adapter_model.safetensors` (see `peftFromTinkerAdapter`).
 * Works on Tinker's archives and on `nexrl serve`'s, which hold the same two files. With
 * `mergeBase`, also writes that base model with the adapter merged in (see `merge-lora.ts`).
 * @throws {@link "nexrl/errors".RunError | RunError} for a run not on Tinker, or an archive without an adapter; the
 * service's errors (a missing key, a deleted or expired checkpoint).
 */
export async function exportPeftAdapter(target: string, options: ExportPeftOptions = {}): Promise<ExportedPeftAdapter> {
  const cwd = options.cwd ?? process.cwd();
  const found = await remoteCheckpoints(target, {
    cwd,
    ...(options.env && { env: options.env }),
    ...(options.log && { log: options.log }),
  });
  const chosen = pick(found.checkpoints);
  let archive: Uint8Array;
  try {
    archive = await (await found.service.rest()).downloadCheckpointArchive(chosen.tinkerPath);
  } finally {
    await found.service.close();
  }
  const entries = new Map(readTar(archive, `the archive of ${chosen.tinkerPath}`).map((e) => [e.name, e.data]));
  const config = entries.get("adapter_config.json");
  const weights = entries.get("adapter_model.safetensors");
  if (!config || !weights)
    throw new RunError(
      `the archive of ${chosen.tinkerPath} holds no LoRA adapter (adapter_config.json and adapter_model.safetensors); it holds ${[...entries.keys()].join(", ") || "nothing"}`,
      { code: "run_folder" },
    );
  const adapter = peftFromTinkerAdapter(config, weights, options.baseModel);
  const outDir =
    options.outDir !== undefined
      ? resolve(cwd, options.outDir)
      : found.runDir !== undefined
        ? join(found.runDir, "export", `step_${String(chosen.step).padStart(6, "0")}-peft`)
        : resolve(cwd, `${chosen.tinkerPath.slice("tinker://".length).replace(/[^A-Za-z0-9._-]+/g, "_")}-peft`);
  const files = await writeFiles(outDir, [
    ["adapter_config.json", `${JSON.stringify(adapter.config, null, 2)}\n`],
    ["adapter_model.safetensors", adapter.safetensors],
  ]);
  const exported = { tinkerPath: chosen.tinkerPath, step: chosen.step, dir: outDir, files, config: adapter.config };
  if (options.mergeBase === undefined) return exported;
  const { mergeLoraIntoBase } = await import("./merge-lora.js");
  const mergedDir = join(outDir, "merged");
  const merged = await mergeLoraIntoBase(
    resolve(cwd, options.mergeBase),
    adapter.config,
    adapter.safetensors,
    mergedDir,
  );
  return { ...exported, merged: { dir: mergedDir, files: merged } };
}
