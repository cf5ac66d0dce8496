/**
 * What `nexrl serve` holds: one engine per created model (base models are the engine's presets),
 * each in an engine host thread of its own so that the event loop answers while it computes; the
 * checkpoints and sampler snapshots they wrote (by `tinker://` or `weaver://` path); and sampling
 * sessions, each with its own host too.
 *
 * @module
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  ByteTokenizer,
  LocalEngine,
  MODEL_PRESETS,
  resolveModelConfig,
  type ModelPresetName,
  type ResolvedLora,
} from "../engine/index.js";
import { resolveLora } from "../engine/lora.js";
import { HostedEngine } from "../engine/engine-host.js";
import type { SampleOutput, SamplingParams } from "../wire/results.js";
import { collectGarbage } from "./collect-garbage.js";
import type { MemoryBudget } from "./memory-budget.js";
import { InFlightOperations, OperationQueue, runOperation, type Operation } from "./operations.js";
import { ConfigError, ProtocolError } from "../errors.js";

/** Fine-tuning modes (Weaver's `training_mode`; Tinker models are always `lora`). */
export type TrainingMode = "lora" | "full_ft";

/** A model created by a client. */
export interface ServedModel {
  /** Its id, as the protocol that created it spells it. */
  readonly id: string;
  /** The preset it was created from. */
  readonly baseModel: ModelPresetName;
  /** The session that created it; the model is unloaded when that session expires. */
  readonly owner: string;
  /** The memory its engine reserves, in bytes (counted against the memory budget). */
  readonly memoryBytes: number;
  /** `lora` (the engine trains rank-`loraRank` factors over frozen base weights) or `full_ft` (every weight). */
  readonly trainingMode: TrainingMode;
  /** The LoRA rank, when `lora`. */
  readonly loraRank: number | undefined;
  /** The LoRA alpha (the factors' product is scaled by alpha / rank), when `lora`. */
  readonly loraAlpha: number | undefined;
  /** The seed of its initial weights (a LoRA model's frozen base, and its factors' initialisation). */
  readonly seed: number;
  /** The engine holding its weights and optimizer state, in its host thread. */
  readonly engine: HostedEngine;
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
  /** That model's initial-weight seed. */
  readonly seed: number;
  /** That model's LoRA rank, when it has one. */
  readonly loraRank: number | undefined;
  /** Milliseconds since the epoch after which it is gone; undefined keeps it (changed by a TTL call). */
  expiresAt: number | undefined;
  /** When it was written (milliseconds since the epoch). */
  readonly createdAt: number;
  /** Whether it was published (Tinker's publish call). */
  public: boolean;
}

/** What samples: a snapshot's sampler or a base model's engine, in its host thread. */
export type Sampler = Pick<HostedEngine, "sampleAsync" | "computeLogprobs" | "close">;

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
  /** The session that opened it; it is closed when that session expires. */
  readonly owner: string;
  /** The memory its sampler reserves, in bytes (counted against the memory budget). */
  readonly memoryBytes: number;
  /** Its sampling and scoring operations not yet finished (closing it waits for them). */
  readonly inFlight: InFlightOperations;
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

/** Runs `run` as an operation of sampling session `session`: closing the session waits for it. */
export function samplingOperation(session: SamplingSession, kind: string, run: () => unknown): Operation {
  const op = runOperation(kind, run);
  session.inFlight.add(op);
  return op;
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
  /** The session creating it. */
  owner: string;
  /** `lora` or `full_ft`. */
  trainingMode: TrainingMode;
  /** LoRA rank of a `lora` model (required for one): an integer from 1 to the base model's `dModel`. */
  loraRank?: number;
  /** LoRA alpha of a `lora` model (default 32). */
  loraAlpha?: number | undefined;
  /** Seed of the initial weights (default: the server's seed). */
  seed?: number;
}

/** Options of {@link ModelStore}. */
export interface ModelStoreOptions {
  /** Where each model's engine writes its files (`models/<n>/…`). */
  outputDir: string;
  /** Default seed of new models and base-model samplers. */
  seed: number;
  /** The memory models and samplers may reserve. */
  budget: MemoryBudget;
  /** Threads of every engine and sampler (default: the machine's available parallelism). */
  threads?: number | undefined;
  /** Receives failures to close an unloaded engine. */
  log: (line: string) => void;
}

/** What {@link ModelStore.unloadOwner} freed. */
export interface Unloaded {
  /** Ids of the models unloaded. */
  models: string[];
  /** Ids of the sampling sessions closed. */
  samplingSessions: string[];
  /** The memory they reserved, in bytes. */
  bytes: number;
}

/** Why a model or sampling session is gone, answered to requests that still name it. */
export interface UnloadReason {
  /** The error code. */
  code: string;
  /** Why, as a clause: "its session … expired after 300 s without a heartbeat". */
  reason: string;
}

/** How many unloaded ids are remembered, to say why they are gone. */
const GONE_CAPACITY = 10_000;

/**
 * Models, artifacts and sampling sessions of one server. Every model and sampling session
 * belongs to the session that created it and is unloaded with it (its engine closed and its
 * memory given back to the budget); its files stay on disk.
 */
export class ModelStore {
  private readonly models = new Map<string, ServedModel>();
  private readonly artifacts = new Map<string, Artifact>();
  private readonly sessions = new Map<string, SamplingSession>();
  private readonly gone = new Map<string, UnloadReason>();
  private modelDirs = 0;
  /** The garbage collection scheduled after closing engines, if any. */
  private collection: NodeJS.Immediate | undefined;
  /** Engines and samplers being closed. */
  private readonly closing = new Set<Promise<void>>();

  /** Where each model's engine writes its files (`models/<n>/…`). */
  readonly outputDir: string;
  /** Default seed of new models and base-model samplers. */
  readonly seed: number;
  /** Threads of every engine and sampler (default: the machine's available parallelism). */
  readonly threads: number | undefined;
  private readonly budget: MemoryBudget;
  private readonly log: (line: string) => void;

  constructor(options: ModelStoreOptions) {
    this.outputDir = options.outputDir;
    this.seed = options.seed;
    this.threads = options.threads;
    this.budget = options.budget;
    this.log = options.log;
  }

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
        `base model "${name}" is not served; nexrl serve offers the local presets ${Object.keys(MODEL_PRESETS).join(", ")}`,
        { status: 400, code: "unknown_base_model" },
      );
    }
    return name as ModelPresetName;
  }

  /**
   * Creates a model with fresh weights (a `lora` model: trained as LoRA factors of
   * `loraRank` over them); its host thread builds the engine meanwhile (its operations wait for
   * that, and fail with the reason if it could not).
   * @throws {@link ProtocolError} 400 for an unknown base model or a LoRA rank or alpha the base
   * model cannot take, 503 when its memory is over the budget.
   */
  createModel(options: CreateModelOptions): ServedModel {
    const baseModel = this.preset(options.baseModel);
    const lora = options.trainingMode === "lora" ? this.loraOf(baseModel, options) : undefined;
    const memoryBytes = this.reserve(baseModel, false, `a ${baseModel} model`, lora);
    const seed = options.seed ?? this.seed;
    const engine = this.built(memoryBytes, () =>
      HostedEngine.create({
        model: baseModel,
        seed,
        outputDir: join(this.outputDir, "models", String(this.modelDirs++)),
        ...(this.threads !== undefined && { threads: this.threads }),
        ...(lora && { lora }),
      }),
    );
    const model: ServedModel = {
      id: options.id,
      baseModel,
      owner: options.owner,
      memoryBytes,
      trainingMode: options.trainingMode,
      loraRank: lora?.rank,
      loraAlpha: lora?.alpha,
      seed,
      engine,
      queue: new OperationQueue(),
      paused: false,
    };
    this.models.set(model.id, model);
    return model;
  }

  /** The model with id `id`. @throws {@link ProtocolError} 410 when it was unloaded, 404 when unknown. */
  model(id: string): ServedModel {
    const model = this.models.get(id);
    const gone = this.gone.get(id);
    if (!model && gone)
      throw new ProtocolError(
        `model "${id}" was unloaded: ${gone.reason}; create a new session and training client (load its last checkpoint to continue)`,
        { status: 410, code: gone.code },
      );
    if (!model)
      throw new ProtocolError(
        `no model "${id}" on this server (it was never created, was terminated, or the server restarted); create a training client first`,
        { status: 404, code: "model_not_found" },
      );
    return model;
  }

  /** Whether a model with id `id` exists. */
  hasModel(id: string): boolean {
    return this.models.has(id);
  }

  /**
   * Unloads a model: requests naming it get 404 at once, the operations it already received
   * run, then its memory is returned to the budget and its engine closed (its host thread ended).
   * Its files stay on disk.
   * @param gone when set, later requests naming it get 410 with this code and reason instead.
   * @returns the memory it reserved, in bytes.
   */
  removeModel(id: string, gone?: UnloadReason): number {
    const model = this.models.get(id);
    if (!model) return 0;
    this.models.delete(id);
    if (gone) this.remember(id, gone);
    const why = gone ? `model "${id}" was unloaded: ${gone.reason}` : `model "${id}" was terminated`;
    this.release(
      model.queue.close(`${why}; the operation did not run`),
      model.engine,
      model.memoryBytes,
      `model "${id}"`,
    );
    return model.memoryBytes;
  }

  /** Whether the models or sampling sessions of session `owner` have operations running or queued. */
  busy(owner: string): boolean {
    for (const model of this.models.values()) if (model.owner === owner && model.queue.busy) return true;
    for (const session of this.sessions.values()) if (session.owner === owner && session.inFlight.size > 0) return true;
    return false;
  }

  /**
   * Unloads every model and closes every sampling session of session `owner` (as
   * {@link ModelStore.removeModel}); later requests naming them get 410 with `gone`'s code and reason.
   */
  unloadOwner(owner: string, gone: UnloadReason): Unloaded {
    const unloaded: Unloaded = { models: [], samplingSessions: [], bytes: 0 };
    for (const model of [...this.models.values()].filter((m) => m.owner === owner)) {
      unloaded.bytes += this.removeModel(model.id, gone);
      unloaded.models.push(model.id);
    }
    for (const session of [...this.sessions.values()].filter((s) => s.owner === owner)) {
      this.remember(session.id, gone);
      this.closeSession(session);
      unloaded.bytes += session.memoryBytes;
      unloaded.samplingSessions.push(session.id);
    }
    return unloaded;
  }

  /**
   * Gives `bytes` back to the budget once `idle` (the last operation of `engine` has run) settles,
   * then closes `engine`, ending its host thread (which frees the memory), logging a failure, then
   * collects garbage (once for all those closed together). The budget counts the engines that may
   * still compute, so a new model may reserve the bytes while the old host is ending.
   */
  private release(idle: Promise<void>, engine: Pick<HostedEngine, "close">, bytes: number, what: string): void {
    const closed = idle
      .catch(() => undefined)
      .then(() => {
        this.budget.release(bytes);
        return engine.close();
      })
      .catch((error: unknown) => this.log(`nexrl serve: closing ${what} failed: ${String(error)}`))
      .finally(() => {
        this.closing.delete(closed);
        if (this.collection) return;
        this.collection = setImmediate(() => {
          this.collection = undefined;
          collectGarbage();
        });
      });
    this.closing.add(closed);
  }

  /**
   * Unloads every model and closes every sampling session (as {@link ModelStore.removeModel}), and
   * resolves once their engines are closed and their host threads ended: the server is closing.
   */
  async close(): Promise<void> {
    for (const id of [...this.models.keys()]) this.removeModel(id);
    for (const session of [...this.sessions.values()]) this.closeSession(session);
    await Promise.all(this.closing);
  }

  /** Closes a sampling session once its operations have run, and gives its memory back. */
  private closeSession(session: SamplingSession): void {
    this.sessions.delete(session.id);
    this.release(session.inFlight.settled(), session.sampler, session.memoryBytes, `sampling session "${session.id}"`);
  }

  /** What `make` builds with the `bytes` reserved for it, given back if building fails. */
  private built<T>(bytes: number, make: () => T): T {
    try {
      return make();
    } catch (error) {
      this.budget.release(bytes);
      throw error;
    }
  }

  private remember(id: string, gone: UnloadReason): void {
    this.gone.set(id, gone);
    if (this.gone.size > GONE_CAPACITY) this.gone.delete(this.gone.keys().next().value!);
  }

  /** The engine's LoRA option of a `lora` model. @throws {@link ProtocolError} 400 for a rank or alpha `baseModel` cannot take. */
  private loraOf(baseModel: ModelPresetName, options: CreateModelOptions): ResolvedLora {
    const config = resolveModelConfig(baseModel, new ByteTokenizer().vocabSize);
    try {
      return resolveLora({ rank: options.loraRank ?? 32, alpha: options.loraAlpha }, config);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      throw new ProtocolError(
        `base model "${baseModel}" cannot take this LoRA config: ${error.message}; pick a rank of at most ${config.dModel} (lora_config.rank)`,
        { status: 400, code: "invalid_lora_config" },
      );
    }
  }

  /** Reserves the memory of an engine (or a snapshot sampler) of `baseModel`. @throws {@link ProtocolError} 503. */
  private reserve(baseModel: ModelPresetName, sampler: boolean, what: string, lora?: ResolvedLora): number {
    const bytes = LocalEngine.memoryBytes(baseModel, {
      sampler,
      ...(this.threads !== undefined && { threads: this.threads }),
      ...(lora && { lora }),
    });
    this.budget.reserve(bytes, what);
    return bytes;
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
    const artifact: Artifact = {
      path,
      file,
      modelId: model.id,
      baseModel: model.baseModel,
      seed: model.seed,
      loraRank: model.loraRank,
      expiresAt,
      createdAt,
      public: false,
    };
    this.artifacts.set(path, artifact);
    return artifact;
  }

  /** The artifacts that have not expired, oldest first. */
  liveArtifacts(): Artifact[] {
    const now = Date.now();
    return [...this.artifacts.values()]
      .filter((a) => a.expiresAt === undefined || a.expiresAt > now)
      .sort((a, b) => a.createdAt - b.createdAt);
  }

  /**
   * Forgets the artifact at `path` and deletes its file (sampling sessions already open on it
   * keep sampling: they read it when they opened).
   * @throws {@link ProtocolError} 404 when unknown or expired.
   */
  async removeArtifact(path: string): Promise<void> {
    const artifact = this.artifact(path);
    this.artifacts.delete(path);
    await rm(artifact.file, { force: true });
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
        `no checkpoint or sampler snapshot at ${path}; use a path returned by a save call of this server`,
        { status: 404, code: "checkpoint_not_found" },
      );
    if (artifact.expiresAt !== undefined && artifact.expiresAt <= Date.now()) {
      throw new ProtocolError(
        `${path} expired at ${new Date(artifact.expiresAt).toISOString()} (its ttl_seconds passed); save a new one`,
        { status: 404, code: "checkpoint_expired" },
      );
    }
    return artifact;
  }

  /**
   * Opens a sampling session of session `owner` on a snapshot (`modelPath`) or on a base model's
   * initial weights.
   * @throws {@link ProtocolError} 404 for an unknown path, 400 for an unknown base model, 503
   * when its memory is over the budget.
   */
  async openSampler(
    id: string,
    source: { modelPath?: string | undefined; baseModel?: string | undefined },
    owner: string,
  ): Promise<SamplingSession> {
    const compute = this.threads !== undefined ? { threads: this.threads } : {};
    const common = { id, owner, inFlight: new InFlightOperations() };
    let session: SamplingSession;
    if (source.modelPath !== undefined) {
      const artifact = this.artifact(source.modelPath);
      const { baseModel, modelId } = artifact;
      const memoryBytes = this.reserve(baseModel, true, `a sampling session of ${source.modelPath}`);
      let sampler: HostedEngine;
      try {
        sampler = await HostedEngine.samplerFromSnapshot(artifact.file, compute);
      } catch (error) {
        this.budget.release(memoryBytes);
        throw error;
      }
      session = {
        ...common,
        sampler,
        baseModel,
        modelPath: source.modelPath,
        modelId,
        contextLength: sampler.config.contextLength,
        memoryBytes,
      };
    } else if (source.baseModel !== undefined) {
      const baseModel = this.preset(source.baseModel);
      const memoryBytes = this.reserve(baseModel, false, `a sampling session of the ${baseModel} base model`);
      const engine = this.built(memoryBytes, () =>
        HostedEngine.create({ model: baseModel, seed: this.seed, outputDir: join(this.outputDir, "base"), ...compute }),
      );
      const { contextLength } = engine.config;
      session = {
        ...common,
        sampler: engine,
        baseModel,
        modelPath: undefined,
        modelId: undefined,
        contextLength,
        memoryBytes,
      };
    } else {
      throw new ProtocolError("give model_path (a saved sampler snapshot) or base_model to sample from", {
        status: 400,
        code: "missing_model",
      });
    }
    this.sessions.set(id, session);
    return session;
  }

  /** The sampling session `id`. @throws {@link ProtocolError} 410 when it was closed, 404 when unknown. */
  samplingSession(id: string): SamplingSession {
    const session = this.sessions.get(id);
    const gone = this.gone.get(id);
    if (!session && gone)
      throw new ProtocolError(`sampling session "${id}" was closed: ${gone.reason}; create a new one`, {
        status: 410,
        code: gone.code,
      });
    if (!session)
      throw new ProtocolError(`no sampling session "${id}" on this server; create one first`, {
        status: 404,
        code: "sampling_session_not_found",
      });
    return session;
  }
}
