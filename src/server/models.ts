/**
 * What `nexrl serve` holds: one {@link LocalEngine} per created model (base models are the
 * engine's presets), the checkpoints and sampler snapshots they wrote (by `tinker://` or
 * `weaver://` path), and sampling sessions.
 *
 * @module
 */
import { join } from "node:path";
import { LocalEngine, MODEL_PRESETS, type LocalSampler, type ModelPresetName } from "../engine/index.js";
import type { SampleOutput, SamplingParams } from "../types/results.js";
import { OperationQueue } from "./operations.js";
import { ProtocolError } from "../errors.js";

/** Fine-tuning modes (Weaver's `training_mode`; Tinker models are always `lora`). */
export type TrainingMode = "lora" | "full_ft";

/** A model created by a client. */
export interface ServedModel {
  /** Its id, as the protocol that created it spells it. */
  readonly id: string;
  /** The preset it was created from. */
  readonly baseModel: ModelPresetName;
  /** `lora` or `full_ft`. The engine trains every weight either way. */
  readonly trainingMode: TrainingMode;
  /** The LoRA rank asked for, when `lora`. */
  readonly loraRank: number | undefined;
  /** The engine holding its weights and optimizer state. */
  readonly engine: LocalEngine;
  /** Its operations, in order. */
  readonly queue: OperationQueue;
  /** Whether generation is paused on its samplers (Weaver, `full_ft` only). */
  paused: boolean;
}

/** A checkpoint or sampler snapshot on disk, known by its protocol path. */
export interface Artifact {
  /** `tinker://…` or `weaver://…` path. */
  readonly path: string;
  /** The file the engine wrote. */
  readonly file: string;
  /** The model that wrote it. */
  readonly modelId: string;
  /** That model's base model. */
  readonly baseModel: ModelPresetName;
  /** Milliseconds since the epoch after which it is gone; undefined keeps it. */
  readonly expiresAt: number | undefined;
  /** When it was written (milliseconds since the epoch). */
  readonly createdAt: number;
}

/** What samples: a snapshot's sampler or a base model's engine. */
export type Sampler = Pick<LocalSampler, "sampleAsync" | "computeLogprobs">;

/** A sampling session. */
export interface SamplingSession {
  /** Its id. */
  readonly id: string;
  /** What it samples from. */
  readonly sampler: Sampler;
  /** The base model. */
  readonly baseModel: ModelPresetName;
  /** The snapshot path, when not the base model. */
  readonly modelPath: string | undefined;
  /** The model whose snapshot it samples, when known. */
  readonly modelId: string | undefined;
  /** The longest sequence it samples (prompt and generated tokens). */
  readonly contextLength: number;
}

/** Sampling parameters as the training protocols send them. */
export interface WireSamplingParams {
  /** Most tokens to generate; default: up to the context length. */
  max_tokens?: number | undefined;
  /** Seed of the samples. */
  seed?: number | undefined;
  /** Stop strings or stop token ids. */
  stop?: string | string[] | number[] | undefined;
  /** Softmax temperature. */
  temperature: number;
  /** Top-k cut (−1: off). */
  top_k: number;
  /** Nucleus mass (1: off). */
  top_p: number;
}

/** Samples `numSamples` continuations of `prompt` in `session`, with the engine's options of `params`. */
export function sampleSession(
  session: SamplingSession,
  prompt: number[],
  params: WireSamplingParams,
  numSamples: number,
): Promise<SampleOutput> {
  const { max_tokens, seed, stop, temperature, top_k, top_p } = params;
  const options: SamplingParams = {
    maxTokens: max_tokens ?? session.contextLength,
    temperature,
    topK: top_k,
    topP: top_p,
    ...(stop !== undefined && { stop: typeof stop === "string" ? [stop] : stop }),
    ...(seed !== undefined && { seed }),
  };
  return session.sampler.sampleAsync(prompt, options, numSamples);
}

/** Options of {@link ModelStore.createModel}. */
export interface CreateModelOptions {
  /** The model's id. */
  id: string;
  /** A preset name. */
  baseModel: string;
  /** `lora` or `full_ft`. */
  trainingMode: TrainingMode;
  /** LoRA rank, recorded for `get_info`. */
  loraRank?: number;
  /** Seed of the initial weights (default: the server's seed). */
  seed?: number;
}

/** Models, artifacts and sampling sessions of one server. */
export class ModelStore {
  private readonly models = new Map<string, ServedModel>();
  private readonly artifacts = new Map<string, Artifact>();
  private readonly sessions = new Map<string, SamplingSession>();
  private modelDirs = 0;

  /**
   * @param outputDir where each model's engine writes its files (`models/<n>/…`).
   * @param seed default seed of new models and base-model samplers.
   * @param threads threads of every engine and sampler (default: the machine's available parallelism).
   */
  constructor(
    readonly outputDir: string,
    readonly seed: number,
    readonly threads?: number,
  ) {}

  /** The presets served as base models, with their context lengths. */
  presets(): Array<{ name: ModelPresetName; contextLength: number }> {
    return (Object.keys(MODEL_PRESETS) as ModelPresetName[]).map((name) => ({
      name,
      contextLength: MODEL_PRESETS[name].contextLength,
    }));
  }

  /**
   * The preset named `name`.
   * @throws {@link ProtocolError} 400 naming the served presets.
   */
  preset(name: string): ModelPresetName {
    if (!Object.hasOwn(MODEL_PRESETS, name)) {
      throw new ProtocolError(
        400,
        "unknown_base_model",
        `base model "${name}" is not served; nexrl serve offers the local presets ${Object.keys(MODEL_PRESETS).join(", ")}`,
      );
    }
    return name as ModelPresetName;
  }

  /** Creates a model with fresh weights. @throws {@link ProtocolError} 400 for an unknown base model. */
  createModel(options: CreateModelOptions): ServedModel {
    const baseModel = this.preset(options.baseModel);
    const engine = LocalEngine.create({
      model: baseModel,
      seed: options.seed ?? this.seed,
      outputDir: join(this.outputDir, "models", String(this.modelDirs++)),
      ...(this.threads !== undefined && { threads: this.threads }),
    });
    const model: ServedModel = {
      id: options.id,
      baseModel,
      trainingMode: options.trainingMode,
      loraRank: options.loraRank,
      engine,
      queue: new OperationQueue(),
      paused: false,
    };
    this.models.set(model.id, model);
    return model;
  }

  /** The model with id `id`. @throws {@link ProtocolError} 404. */
  model(id: string): ServedModel {
    const model = this.models.get(id);
    if (!model)
      throw new ProtocolError(
        404,
        "model_not_found",
        `no model "${id}" on this server (it was never created, was terminated, or the server restarted); create a training client first`,
      );
    return model;
  }

  /** Whether a model with id `id` exists. */
  hasModel(id: string): boolean {
    return this.models.has(id);
  }

  /** Forgets a model; its files stay on disk. */
  removeModel(id: string): void {
    this.models.delete(id);
  }

  /**
   * Records `file`, written by `model`, as the artifact at `path`, expiring `ttlSeconds` after
   * `createdAt` (undefined or null: kept).
   */
  addArtifact(
    model: ServedModel,
    path: string,
    file: string,
    ttlSeconds: number | null | undefined,
    createdAt = Date.now(),
  ): Artifact {
    const expiresAt = ttlSeconds == null ? undefined : createdAt + ttlSeconds * 1000;
    const artifact = { path, file, modelId: model.id, baseModel: model.baseModel, expiresAt, createdAt };
    this.artifacts.set(path, artifact);
    return artifact;
  }

  /** Whether an artifact (expired or not) was recorded at `path`. */
  hasArtifact(path: string): boolean {
    return this.artifacts.has(path);
  }

  /** The artifact at `path`. @throws {@link ProtocolError} 404 when unknown or expired. */
  artifact(path: string): Artifact {
    const artifact = this.artifacts.get(path);
    if (!artifact)
      throw new ProtocolError(
        404,
        "checkpoint_not_found",
        `no checkpoint or sampler snapshot at ${path}; use a path returned by a save call of this server`,
      );
    if (artifact.expiresAt !== undefined && artifact.expiresAt <= Date.now()) {
      throw new ProtocolError(
        404,
        "checkpoint_expired",
        `${path} expired at ${new Date(artifact.expiresAt).toISOString()} (its ttl_seconds passed); save a new one`,
      );
    }
    return artifact;
  }

  /**
   * Opens a sampling session on a snapshot (`modelPath`) or on a base model's initial weights.
   * @throws {@link ProtocolError} 404 for an unknown path, 400 for an unknown base model.
   */
  async openSampler(
    id: string,
    source: { modelPath?: string | undefined; baseModel?: string | undefined },
  ): Promise<SamplingSession> {
    let session: SamplingSession;
    if (source.modelPath !== undefined) {
      const artifact = this.artifact(source.modelPath);
      const sampler = await LocalEngine.samplerFromSnapshot(artifact.file, {
        ...(this.threads !== undefined && { threads: this.threads }),
      });
      const { baseModel, modelId } = artifact;
      session = {
        id,
        sampler,
        baseModel,
        modelPath: source.modelPath,
        modelId,
        contextLength: sampler.config.contextLength,
      };
    } else if (source.baseModel !== undefined) {
      const baseModel = this.preset(source.baseModel);
      const engine = LocalEngine.create({
        model: baseModel,
        seed: this.seed,
        outputDir: join(this.outputDir, "base"),
        ...(this.threads !== undefined && { threads: this.threads }),
      });
      const { contextLength } = engine.config;
      session = { id, sampler: engine, baseModel, modelPath: undefined, modelId: undefined, contextLength };
    } else {
      throw new ProtocolError(
        400,
        "missing_model",
        "give model_path (a saved sampler snapshot) or base_model to sample from",
      );
    }
    this.sessions.set(id, session);
    return session;
  }

  /** The sampling session `id`. @throws {@link ProtocolError} 404. */
  samplingSession(id: string): SamplingSession {
    const session = this.sessions.get(id);
    if (!session)
      throw new ProtocolError(
        404,
        "sampling_session_not_found",
        `no sampling session "${id}" on this server; create one first`,
      );
    return session;
  }
}
