/**
 * {@link LocalEngine}: the embedded CPU model that plays both the training service and the
 * sampling service for `backend: local`.
 *
 * @module
 */
import type { ForwardBackwardOutput, OptimStepOutput, SampleOutput, SamplingParams } from "../wire/results.js";
import type { AdamParams, Datum } from "../wire/wire.js";
import { resolveModelConfig, type ModelConfig, type ModelPresetName, type ResolvedModelConfig } from "./config.js";
import type { KernelKind } from "./matrix.js";
import { loraBytes, resolveLora, type LoraOptions, type ResolvedLora } from "./lora.js";
import { parameterCount } from "./params.js";
import { EngineRuntime, storageBytes, type ComputeOptions } from "./runtime.js";
import { LocalSampler } from "./sampler.js";
import { encodeStateFile, type StateFileContents, type StateFileLora } from "./state-file.js";
import { filePath, readStateFile, writeFileAtomic } from "./storage.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import { ByteTokenizer } from "./tokenizer.js";
import { TrainingCore, trainingChunkRows } from "./training.js";
import { ConfigError } from "../errors.js";
import { stateFileError } from "./state-file.js";

/** Options of {@link LocalEngine.create}. */
export interface LocalEngineOptions extends ComputeOptions {
  /** A preset name (`tiny`, `small`, `medium`) or an explicit shape. */
  model: ModelPresetName | ModelConfig;
  /** Seed of the initial weights (default 0): the same seed gives the same model. */
  seed?: number;
  /** Folder for checkpoints (`checkpoints/<name>.nxs`) and snapshots (`sampler_weights/<name>.nxw`). */
  outputDir: string;
  /**
   * Train LoRA factors of rank `rank` on every block's attention and MLP projections over frozen
   * base weights (embeddings, layer norms and biases frozen too) instead of every weight. The
   * weights the engine computes and samples with, {@link LocalEngine.getWeights} and its files'
   * `weights`, are the effective ones, W0 + (alpha/rank)·A·B; its files also hold the factors and
   * the base. Omitted: every weight is trained.
   */
  lora?: LoraOptions | undefined;
}

/** Options of {@link LocalEngine.saveState} and {@link LocalEngine.loadState}. */
export interface StateOptions {
  /** Include (or restore) the Adam moments and step count, not only the weights. */
  optimizer: boolean;
}

/**
 * A small decoder-only transformer trained and sampled on the CPU: pre-LayerNorm blocks with
 * causal multi-head attention and a GELU MLP (4× width), learned positional embeddings, a final
 * LayerNorm and an output projection tied to the token embeddings; byte-level tokenizer.
 *
 * Training follows Tinker's contract: `forwardBackward` adds gradients of the summed loss until
 * `optimStep` applies AdamW and clears them. Sampling uses a key/value cache.
 *
 * Compute: `threads` threads (default: the machine's available parallelism) split each batch's
 * sequences and each sampling request's samples between them; the matrix products run as
 * WebAssembly SIMD kernels where the runtime supports them. Training results are deterministic
 * for a given thread count; samples do not depend on it. The calls stay synchronous: the calling
 * thread takes a share and waits for the others. {@link LocalEngine.close} releases the threads
 * (idle ones never keep the process alive).
 *
 * @example
 * ```ts
 * const engine = LocalEngine.create({ model: "tiny", outputDir: "out" });
 * const tokens = engine.tokenizer.encode("hello", { addBos: true });
 * engine.forwardBackward([datum(tokens.slice(0, -1), { target_tokens: tokens.slice(1), weights: [1, 1, 1, 1, 1] })], "cross_entropy");
 * engine.optimStep(adamParams({ learningRate: 1e-3 }));
 * const path = await engine.saveWeightsForSampler("step_000001");
 * ```
 */
export class LocalEngine {
  /** The byte-level tokenizer the model reads and writes. */
  readonly tokenizer: Tokenizer;
  private readonly core: TrainingCore;
  private readonly sampler: LocalSampler;

  private constructor(
    /** The model's resolved shape. */
    readonly config: ResolvedModelConfig,
    /** Folder of the engine's checkpoint and snapshot files. */
    readonly outputDir: string,
    seed: number,
    tokenizer: Tokenizer,
    compute: ComputeOptions,
    lora: ResolvedLora | undefined,
  ) {
    this.tokenizer = tokenizer;
    this.core = new TrainingCore(config, seed, { ...compute, lora });
    this.sampler = new LocalSampler(this.core.runtime, tokenizer, false);
  }

  /**
   * Builds an engine with freshly initialised weights.
   * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown preset or an invalid shape,
   * {@link "nexrl".ConfigError | ConfigError} for invalid `threads` or unavailable `kernels`, or a
   * `lora` rank outside [1, dModel] or a non-positive alpha.
   */
  static create(options: LocalEngineOptions): LocalEngine {
    const tokenizer = new ByteTokenizer();
    const seed = options.seed ?? 0;
    if (!Number.isFinite(seed)) throw new ConfigError(`seed must be a finite number, got ${seed}`);
    if (typeof options.outputDir !== "string" || options.outputDir === "")
      throw new ConfigError("outputDir must be a non-empty path");
    const compute = { threads: options.threads, kernels: options.kernels };
    const config = resolveModelConfig(options.model, tokenizer.vocabSize);
    const lora = options.lora === undefined ? undefined : resolveLora(options.lora, config);
    return new LocalEngine(config, options.outputDir, seed, tokenizer, compute, lora);
  }

  /**
   * A sampler serving the weights of a snapshot (or training-state) file; it is independent of
   * any engine, so it keeps serving those weights while training continues. Close it with
   * {@link LocalSampler.close} when done (a sampler dropped without closing releases its threads
   * when it is garbage-collected).
   * @param compute threads and kernels, as for {@link LocalEngine.create}.
   * @throws EngineError when the file is missing, foreign, truncated or corrupt.
   */
  static async samplerFromSnapshot(path: string, compute: ComputeOptions = {}): Promise<LocalSampler> {
    const contents = await readStateFile(path);
    const tokenizer = new ByteTokenizer();
    let config: ResolvedModelConfig;
    try {
      config = resolveModelConfig(contents.config, tokenizer.vocabSize);
    } catch (err) {
      throw stateFileError(path, "corrupt", `its model config is invalid: ${(err as Error).message}`);
    }
    if (parameterCount(config) !== contents.weights.length) {
      throw stateFileError(
        path,
        "corrupt",
        `its config needs ${parameterCount(config)} parameters but it holds ${contents.weights.length}`,
      );
    }
    const runtime = new EngineRuntime(config, compute, 0);
    runtime.views.weights.flat.set(contents.weights);
    return new LocalSampler(runtime, tokenizer, true);
  }

  /**
   * Bytes of memory an engine of `model` reserves with `compute`'s threads (its weights,
   * gradients and Adam moments, and each thread's workspace and decoder cache), or with
   * `sampler: true` what a {@link LocalEngine.samplerFromSnapshot} sampler of that model
   * reserves: the most it can hold resident, known before building it (a server budgets its
   * models with it). With `lora`, an engine of that LoRA rank (its factors, their optimizer state
   * the frozen base projections and the chain rule's scratch on top).
   * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown preset, an invalid shape or invalid `threads`.
   */
  static memoryBytes(
    model: ModelPresetName | ModelConfig,
    compute: ComputeOptions & { sampler?: boolean; lora?: LoraOptions | undefined } = {},
  ): number {
    const config = resolveModelConfig(model, new ByteTokenizer().vocabSize);
    const storage = storageBytes(config, compute, compute.sampler ? 0 : trainingChunkRows(config));
    if (compute.sampler || compute.lora === undefined) return storage;
    return storage + loraBytes(config, resolveLora(compute.lora, config).rank);
  }

  /** Number of threads the engine computes with. */
  get threads(): number {
    return this.core.runtime.threads;
  }

  /** Which matrix kernels the engine runs: `wasm` (WebAssembly SIMD) or `js`. */
  get kernels(): KernelKind {
    return this.core.runtime.kernels.kind;
  }

  /**
   * Releases the engine's worker threads (terminated once no other engine of the process uses
   * them). The engine cannot compute afterwards. Idempotent.
   */
  async close(): Promise<void> {
    await this.core.runtime.close();
  }

  /** Number of optimizer steps taken (restored by {@link LocalEngine.loadState} with the optimizer). */
  get step(): number {
    return this.core.adam.step;
  }

  /** The LoRA rank and alpha the engine trains with; null when it trains every weight. */
  get lora(): ResolvedLora | null {
    return this.core.lora ? { ...this.core.lora.lora } : null;
  }

  /**
   * A copy of all weights as one flat array (layout: see the engine's parameter module); for a
   * LoRA engine the effective ones, base plus adapter.
   */
  getWeights(): Float32Array {
    return this.core.weights.flat.slice();
  }

  /**
   * Target logprobs and loss of each datum; touches no gradients.
   * @param lossFn a loss of `lossFunctions` that the local backend offers.
   * @param lossFnConfig overrides of the loss's config defaults.
   * @throws InputError for inputs that break the loss contract, {@link "nexrl/errors".ContextLengthError | ContextLengthError}
   * for a datum longer than the context, {@link "nexrl".InputError | InputError} for ids outside the vocabulary.
   */
  forward(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig?: Readonly<Record<string, number>>,
  ): ForwardBackwardOutput {
    return this.core.run(datums, lossFn, lossFnConfig, false);
  }

  /** Like {@link LocalEngine.forward}, and adds the gradients of the summed loss to the accumulated ones. */
  forwardBackward(
    datums: readonly Datum[],
    lossFn: string,
    lossFnConfig?: Readonly<Record<string, number>>,
  ): ForwardBackwardOutput {
    return this.core.run(datums, lossFn, lossFnConfig, true);
  }

  /**
   * Applies AdamW (decoupled weight decay, bias correction, global-norm clipping) to the
   * accumulated gradients and clears them. Its metrics: `grad_norm:mean`, the global gradient
   * norm before clipping; `step:max`, the optimizer steps taken so far (this one included);
   * `learning_rate:mean`, the learning rate used.
   * @throws InputError for invalid `adam` values, {@link "nexrl".EngineError | EngineError} when the
   * gradient is not finite (the step is skipped).
   */
  optimStep(adam: AdamParams): OptimStepOutput {
    return this.core.optimStep(adam);
  }

  /** Samples from the current weights; see {@link LocalSampler.sample}. */
  sample(promptTokens: readonly number[], options: SamplingParams, numSamples = 1): SampleOutput {
    return this.sampler.sample(promptTokens, options, numSamples);
  }

  /**
   * {@link LocalEngine.sample} with a turn of the event loop between sequences; see
   * {@link LocalSampler.sampleAsync}. Do not train this engine until it resolves.
   */
  sampleAsync(promptTokens: readonly number[], options: SamplingParams, numSamples = 1): Promise<SampleOutput> {
    return this.sampler.sampleAsync(promptTokens, options, numSamples);
  }

  /** Logprobs of `tokens` under the current weights; see {@link LocalSampler.computeLogprobs}. */
  computeLogprobs(tokens: readonly number[]): (number | null)[] {
    return this.sampler.computeLogprobs(tokens);
  }

  /**
   * Writes the weights (and with `optimizer`, the Adam moments and step count) to
   * `outputDir/checkpoints/<name>.nxs`, replacing an older file of that name atomically.
   * Accumulated gradients are not saved. Returns the absolute path.
   * @throws {@link "nexrl".InputError | InputError} for a name that is not a plain file-name stem.
   */
  async saveState(name: string, options: StateOptions): Promise<string> {
    const path = filePath(this.outputDir, "checkpoints", name, ".nxs");
    const { adam } = this.core;
    await writeFileAtomic(
      path,
      encodeStateFile({
        kind: "training_state",
        config: this.config,
        weights: this.core.weights.flat,
        optimizer: options.optimizer ? { m: adam.m, v: adam.v, step: adam.step } : null,
        lora: this.loraContents(),
      }),
      false,
    );
    return path;
  }

  /**
   * Restores weights from a file written by {@link LocalEngine.saveState} (or a sampler snapshot,
   * weights only) exactly, bit for bit. With `optimizer`, the Adam moments and step count are
   * restored too; without, they are reset as for a fresh optimizer. Accumulated gradients are
   * cleared either way.
   * @throws EngineError when the file is missing, foreign, truncated, corrupt, made for another
   * model shape, or lacks the optimizer state that was asked for.
   */
  async loadState(path: string, options: StateOptions): Promise<void> {
    const contents = await readStateFile(path);
    this.checkConfig(path, contents);
    if (options.optimizer && !contents.optimizer) {
      throw stateFileError(
        path,
        "missing_optimizer",
        "it holds weights only (saved with optimizer: false, or a sampler snapshot); load it with { optimizer: false }",
      );
    }
    this.core.weights.flat.set(contents.weights);
    if (this.core.lora && contents.lora) {
      this.core.lora.factors.set(contents.lora.factors);
      this.core.lora.base.set(contents.lora.base);
    }
    const { adam } = this.core;
    if (options.optimizer && contents.optimizer) {
      adam.m.set(contents.optimizer.m);
      adam.v.set(contents.optimizer.v);
      adam.step = contents.optimizer.step;
    } else {
      adam.reset();
    }
    this.core.grads.flat.fill(0);
  }

  /**
   * Writes an immutable snapshot of the current weights to
   * `outputDir/sampler_weights/<name>.nxw` for {@link LocalEngine.samplerFromSnapshot}, and
   * returns its absolute path.
   * @throws {@link "nexrl".EngineError | EngineError} when the name is taken, {@link "nexrl".InputError | InputError} for
   * an invalid name.
   */
  async saveWeightsForSampler(name: string): Promise<string> {
    const path = filePath(this.outputDir, "sampler_weights", name, ".nxw");
    await writeFileAtomic(
      path,
      encodeStateFile({
        kind: "sampler_weights",
        config: this.config,
        weights: this.core.weights.flat,
        optimizer: null,
        lora: this.loraContents(),
      }),
      true,
    );
    return path;
  }

  /** The LoRA part of the engine's files, or null for a full-weight engine. */
  private loraContents(): StateFileLora | null {
    const lora = this.core.lora;
    return lora && { ...lora.lora, factors: lora.factors, base: lora.base };
  }

  private checkConfig(path: string, contents: StateFileContents): void {
    const keys = Object.keys(this.config) as Array<keyof ResolvedModelConfig>;
    const diffs = keys
      .filter((k) => contents.config[k] !== this.config[k])
      .map((k) => `${k} ${String(contents.config[k])} (engine: ${this.config[k]})`);
    if (diffs.length > 0 || contents.weights.length !== this.core.weights.flat.length) {
      throw stateFileError(
        path,
        "config_mismatch",
        `it was saved from a different model shape: ${diffs.join(", ") || "parameter count differs"}; create the engine with the same model config`,
      );
    }
    const mine = this.core.lora?.lora;
    const theirs = contents.lora;
    const describe = (l: { rank: number; alpha: number } | null | undefined): string =>
      l ? `a LoRA model of rank ${l.rank}, alpha ${l.alpha}` : "a full-weight model";
    if (
      mine?.rank !== theirs?.rank ||
      mine?.alpha !== theirs?.alpha ||
      (mine && theirs && theirs.factors.length !== this.core.lora!.factors.length)
    ) {
      throw stateFileError(
        path,
        "config_mismatch",
        `it was saved from ${describe(theirs)} but this engine is ${describe(mine)}; create the engine with the same lora option`,
      );
    }
  }
}
