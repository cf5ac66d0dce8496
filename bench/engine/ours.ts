/** nexrl's embedded engine driven through its public engine API, on the shared workload. */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { LocalEngine } from "../../dist/engine/index.js";
import { datum, type Datum } from "../../dist/types/wire.js";
import { ADAM, MAX_TOKENS, NUM_SAMPLES, SEED, SHAPE, samplingPrompt, trainingBatch } from "./workload.js";

export class OurEngine {
  private readonly outputDir = mkdtempSync(path.join(os.tmpdir(), "nexrl-bench-"));
  private readonly engine: LocalEngine;
  private readonly datums: Datum[];
  readonly prompt: number[];
  /** Ends a sample early; the tfjs side stops on it too, so both do the same kind of work. */
  readonly eosId: number;
  private sampleSeed = SEED;

  constructor(dModel: number) {
    this.engine = LocalEngine.create({ model: { dModel, ...SHAPE }, seed: SEED, outputDir: this.outputDir });
    this.datums = trainingBatch().map((s) => datum(s.inputs, { target_tokens: s.targets, weights: s.weights }));
    this.prompt = samplingPrompt(this.engine.tokenizer.bosId);
    this.eosId = this.engine.tokenizer.eosId;
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
      { maxTokens: MAX_TOKENS, temperature: 1, seed: this.sampleSeed++ },
      NUM_SAMPLES,
    );
    return sequences.reduce((n, s) => n + s.tokens.length, 0);
  }

  dispose(): void {
    rmSync(this.outputDir, { recursive: true, force: true });
  }
}
