/**
 * A run's trained model, ready to sample: `RUN_DIR[:step]` → a sampling client and the run's
 * tokenizer, for `nexrl sample` and `nexrl serve --model`.
 * @module
 */
import { basename } from "node:path";
import { REDACTED } from "../recipe/redact.js";
import { loadTokenizer } from "../inference/tokenizers/load.js";
import { createTrainingService, type TrainingServiceOptions } from "../backends/index.js";
import type { SamplingClient, TrainingBackend, TrainingService } from "../contracts/training.js";
import { RENDERER_IDS, type RendererId, type Tokenizer } from "../wire/tokenizer.js";
import { configValue, readRunFolder, type RunFolder } from "./read.js";
import { readRunWeights, type RunCheckpoint, type RunSnapshot } from "./weights.js";
import { RunError } from "../errors.js";

/** A run folder and, optionally, a step: what `RUN_DIR[:step]` names. */
export interface RunModelRef {
  /** The run folder. */
  dir: string;
  /** The step whose weights to use; undefined for the latest. */
  step?: number;
}

/**
 * Parses `RUN_DIR[:step]`: a trailing `:<digits>` (or `:step_<digits>`) is the step.
 * @throws {@link "nexrl/errors".RunError | RunError} for an empty folder name.
 */
export function parseRunModelRef(text: string): RunModelRef {
  const match = /^(.*):(?:step_)?(\d+)$/.exec(text);
  const dir = match ? match[1]! : text;
  if (dir === "")
    throw new RunError(`"${text}" names no run folder; write RUN_DIR or RUN_DIR:STEP`, { code: "run_folder" });
  return match ? { dir, step: Number(match[2]) } : { dir };
}

/** Options of {@link openRunModel}. */
export interface OpenRunModelOptions {
  /** Folder a relative run folder is found from (default: the current directory). */
  cwd?: string;
  /** Environment: the remote services' keys (`TINKER_API_KEY`, `WEAVER_API_KEY`) and base URLs. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Receives notes (such as weights being exported for sampling) and the service's retry warnings. */
  log?: (line: string) => void;
  /** Refuse remote runs (for serving weights that must be on this machine). */
  localOnly?: boolean;
  /**
   * Sample a local run's weights in an engine host thread of its own, so that the calling
   * thread's event loop keeps running meanwhile (`nexrl serve --model`); see
   * the local backend's `engineHosts`.
   */
  engineHosts?: boolean;
}

/** A run's model, opened for sampling. */
export interface RunModel {
  /** Its name: `<run folder name>:<step>`. */
  name: string;
  /** The run folder. */
  dir: string;
  /** The step of the weights. */
  step: number;
  /** Training backend of the run. */
  backend: TrainingBackend;
  /** Base model of the run. */
  baseModel: string;
  /** The run's resolved recipe (secrets redacted). */
  config: Record<string, unknown>;
  /** What is sampled: a weights file for the local engine, a sampler path of the service otherwise. */
  source: string;
  /** Samples and scores with the weights. */
  samplingClient: SamplingClient;
  /** The run's tokenizer. */
  tokenizer: Tokenizer;
  /** Releases the service connection. */
  close(): Promise<void>;
}

const BACKENDS: readonly string[] = ["local", "tinker", "weaver"];

/** The tokenizer name a run used, chosen as the pipeline chooses it. */
function tokenizerName(config: Record<string, unknown>, baseModel: string): string {
  for (const key of ["rollout_worker.tokenizer", "service.inference_service.tokenizer", "data.tokenizer_path"]) {
    const value = configValue(config, key);
    if (typeof value === "string" && value !== "") return value;
  }
  return baseModel;
}

/** The chat renderer a run asked for (`rollout_worker.chat_renderer`), as the pipeline reads it. */
function tokenizerOptions(config: Record<string, unknown>): { renderer?: RendererId } {
  const renderer = configValue(config, "rollout_worker.chat_renderer");
  return (RENDERER_IDS as readonly unknown[]).includes(renderer) ? { renderer: renderer as RendererId } : {};
}

/** The weights at `step` (the latest without one): a checkpoint, else a local sampler snapshot.
 * @throws {@link "nexrl/errors".RunError | RunError} when the run has none, or none at `step`. */
export function pickWeights(
  run: RunFolder,
  checkpoints: RunCheckpoint[],
  snapshots: RunSnapshot[],
  step: number | undefined,
): { checkpoint?: RunCheckpoint; snapshot?: RunSnapshot } {
  const steps = [...new Set([...checkpoints, ...snapshots].map((w) => w.step))].sort((a, b) => a - b);
  if (steps.length === 0)
    throw new RunError(
      `${run.dir} holds no weights to sample: it has no checkpoint (a run saves one at its end unless trainer.save_final is false)` +
        (snapshots.length === 0 && configValue(run.config, "service.train_service.backend") === "local"
          ? " and no sampler snapshot in sampler_weights/"
          : ""),
      { code: "run_folder" },
    );
  const wanted = step ?? steps.at(-1)!;
  const checkpoint = checkpoints.find((c) => c.step === wanted);
  const snapshot = snapshots.find((s) => s.step === wanted);
  if (!checkpoint && !snapshot)
    throw new RunError(`${run.dir} has no weights at step ${wanted}; it has weights at steps ${steps.join(", ")}`, {
      code: "run_folder",
    });
  return { ...(checkpoint && { checkpoint }), ...(snapshot && { snapshot }) };
}

/** The service options of a remote run: base URL from the recipe, key from the recipe unless redacted, else the environment. */
export function remoteOptions(
  run: RunFolder,
  backend: "tinker" | "weaver",
  options: OpenRunModelOptions,
): TrainingServiceOptions {
  const settings = configValue(run.config, `service.${backend}_service`) as Record<string, unknown> | null | undefined;
  const apiKey = settings?.api_key;
  const baseUrl = settings?.base_url;
  return {
    env: options.env ?? process.env,
    ...(options.log && { log: options.log }),
    ...(typeof apiKey === "string" && apiKey !== REDACTED && apiKey !== "" && { apiKey }),
    ...(typeof baseUrl === "string" && baseUrl !== "" && { baseUrl }),
  };
}

/**
 * A sampler path of `checkpoint`'s weights on a remote service: the sampler it recorded when that
 * sampler holds the same step, else a new one exported from its training state.
 */
async function remoteSamplerPath(
  service: TrainingService,
  run: RunFolder,
  checkpoint: RunCheckpoint,
  log: (line: string) => void,
): Promise<string> {
  if (checkpoint.samplerVersion === checkpoint.step) return checkpoint.samplerPath;
  log(
    `the checkpoint of step ${checkpoint.step} recorded the sampler of step ${checkpoint.samplerVersion}; exporting its own weights for sampling`,
  );
  const backend = checkpoint.model.backend;
  const rank = configValue(run.config, `service.${backend}_service.lora_rank`);
  const mode = configValue(run.config, `service.${backend}_service.training_mode`);
  const client = await service.createTrainingClient({
    baseModel: checkpoint.model.name,
    ...(typeof rank === "number" && { loraRank: rank }),
    ...((mode === "lora" || mode === "full_ft") && { trainingMode: mode }),
  });
  await (await client.loadState(checkpoint.trainingState, { optimizer: false })).result();
  const name = `sample-step_${String(checkpoint.step).padStart(6, "0")}-${Date.now()}`;
  return (await (await client.saveWeightsForSampler(name)).result()).path;
}

/**
 * Opens the model of a run folder at a step (the latest by default): a local run's weights file
 * (a checkpoint's training state, or a sampler snapshot of that step) on the embedded engine; a
 * remote run's sampler path on its service (the checkpoint's, or one exported from its
 * training state), with the recipe's base URL and the key from the environment.
 * @throws {@link "nexrl/errors".RunError | RunError} for a missing folder or step; the service's errors (a missing
 * key, a network failure) for remote runs.
 */
export async function openRunModel(ref: RunModelRef | string, options: OpenRunModelOptions = {}): Promise<RunModel> {
  const { dir, step } = typeof ref === "string" ? parseRunModelRef(ref) : ref;
  const log = options.log ?? (() => {});
  const run = await readRunFolder(dir, options);
  const backend = configValue(run.config, "service.train_service.backend");
  const baseModel = configValue(run.config, "service.train_service.model");
  if (typeof backend !== "string" || !BACKENDS.includes(backend) || typeof baseModel !== "string")
    throw new RunError(
      `${run.dir}/config.resolved.yaml names no training backend and model (service.train_service); is it a folder a run wrote?`,
      { code: "run_folder" },
    );
  if (options.localOnly && backend !== "local")
    throw new RunError(
      `${run.dir} trained on ${backend}: its weights are on that service, not on this machine; sample them with \`nexrl sample ${dir}\`, or serve them through the service's own endpoints`,
      { code: "run_folder" },
    );
  const { checkpoints, snapshots } = await readRunWeights(run);
  const picked = pickWeights(run, checkpoints, snapshots, step);
  const service = createTrainingService(
    backend as TrainingBackend,
    backend === "local"
      ? { outputDir: run.dir, ...(options.engineHosts && { engineHosts: true }) }
      : remoteOptions(run, backend as "tinker" | "weaver", options),
  );
  try {
    await service.connect();
    const source =
      backend === "local"
        ? (picked.checkpoint?.trainingState ?? picked.snapshot!.file)
        : await remoteSamplerPath(service, run, picked.checkpoint!, log);
    const samplingClient = await service.createSamplingClient(source);
    const tokenizer = await loadTokenizer(tokenizerName(run.config, baseModel), tokenizerOptions(run.config));
    const at = picked.checkpoint?.step ?? picked.snapshot!.step;
    return {
      name: `${basename(run.dir)}:${at}`,
      dir: run.dir,
      step: at,
      backend: backend as TrainingBackend,
      baseModel,
      config: run.config,
      source,
      samplingClient,
      tokenizer,
      close: () => service.close(),
    };
  } catch (error) {
    await service.close();
    throw error;
  }
}
