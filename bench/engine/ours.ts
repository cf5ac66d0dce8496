/** nexrl's embedded engine driven through its public engine API, on the shared workload. */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  LocalEngine,
  type ModelConfig,
  type ModelPresetName,
  type ResolvedModelConfig,
} from "../../dist/engine/index.js";
import { datum, type Datum } from "../../dist/wire/wire.js";
import {
  ADAM,
  MAX_TOKENS,
  NUM_SAMPLES,
  SEED,
  SHAPE,
  samplingPrompt,
  trainingBatch,
  type PresetWorkload,
  type Sequence,
} from "./workload.js";

/** The bench's model of width `dModel`, or a preset by name. */
export function benchModel(model: number | ModelPresetName): ModelConfig | ModelPresetName {
  return typeof model === "number" ? { dModel: model, ...SHAPE } : model;
}

export class OurEngine {
  private readonly outputDir = mkdtempSync(path.join(os.tmpdir(), "nexrl-bench-"));
  private readonly engine: LocalEngine;
  private readonly datums: Datum[];
  readonly prompt: number[];
  /** Ends a sample early; the tfjs and PyTorch sides stop on it too, so both do the same kind of work. */
  readonly eosId: number;
  private sampleSeed = SEED;

  /**
   * @param model the width of the bench's shape, or a preset.
   * @param batch the training batch (default: the shared workload's).
   * @param maxTokens tokens per sample (default: the shared workload's).
   * @param numSamples samples per sampling request (default: the shared workload's).
   */
  constructor(
    model: number | ModelPresetName,
    batch: Sequence[] = trainingBatch(),
    private readonly maxTokens = MAX_TOKENS,
    private readonly numSamples = NUM_SAMPLES,
  ) {
    this.engine = LocalEngine.create({ model: benchModel(model), seed: SEED, outputDir: this.outputDir });
    this.datums = batch.map((s) => datum(s.inputs, { target_tokens: s.targets, weights: s.weights }));
    this.prompt = samplingPrompt(this.engine.tokenizer.bosId);
    this.eosId = this.engine.tokenizer.eosId;
  }

  /** An engine of a preset on that preset's workload. */
  static forPreset(workload: PresetWorkload): OurEngine {
    const { preset, batch, seqLen, maxTokens, numSamples } = workload;
    return new OurEngine(preset, trainingBatch(batch, seqLen), maxTokens, numSamples);
  }

  /** Threads and kernels the engine computes with. */
  get compute(): { threads: number; kernels: string } {
    return { threads: this.engine.threads, kernels: this.engine.kernels };
  }

  /** The model's resolved shape. */
  get config(): ResolvedModelConfig {
    return this.engine.config;
  }

  /** A copy of the current weights (the engine's flat layout), e.g. to start a baseline from them. */
  getWeights(): Float32Array {
    return this.engine.getWeights();
  }

  /** forward_backward + optim_step on the batch. @returns the summed weighted loss. */
  trainStep(): number {
    const { metrics } = this.engine.forwardBackward(this.datums, "cross_entropy");
    this.engine.optimStep(ADAM);
    return metrics["loss:sum"] ?? Number.NaN;
  }

  /** One sampling request. @returns the number of tokens generated. */
  sample(): number {
    const { sequences } = this.engine.sample(
      this.prompt,
      { maxTokens: this.maxTokens, temperature: 1, seed: this.sampleSeed++ },
      this.numSamples,
    );
    return sequences.reduce((n, s) => n + s.tokens.length, 0);
  }

  async dispose(): Promise<void> {
    await this.engine.close();
    rmSync(this.outputDir, { recursive: true, force: true });
  }
}
