/**
 * The embedded engine against a TensorFlow.js (wasm backend) model of the same shape, measured
 * side by side in one process: training step time, sampling throughput, and our peak memory;
 * then the `medium` and `large` presets alone, reported without a target; then PyTorch (bench/torch/) as a
 * second baseline on d64, d128, `small` and `medium`, in a child process.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { OurEngine } from "../engine/ours.js";
import {
  ADAM,
  BATCH,
  D_MODELS,
  LARGE,
  MAX_TOKENS,
  MEDIUM,
  NUM_SAMPLES,
  SEED,
  SEQ_LEN,
  SHAPE,
  VOCAB_SIZE,
  trainingBatch,
  type PresetWorkload,
} from "../engine/workload.js";
import { comparedRow, reportRow, targetRow, type Row, type Suite, type SuiteContext } from "../lib/suite.js";
import { sideBySide } from "../lib/timing.js";
import { loadTfjs } from "../tfjs/load.js";
import { torchRows } from "../torch/rows.js";
import { TfjsTransformer } from "../tfjs/model.js";
import type { Tf } from "../tfjs/tf.js";

const TRAIN = { warmup: 2, runs: 7 };
const SAMPLE = { warmup: 1, runs: 5 };
/** Rounds of the report-only preset rows: `large`'s step takes seconds, so it gets fewer. */
const PRESET_ROUNDS = {
  medium: { train: { warmup: 1, runs: 3 }, sample: { warmup: 1, runs: 3 } },
  large: { train: { warmup: 1, runs: 2 }, sample: { warmup: 0, runs: 2 } },
} as const;
const RSS_D_MODEL = 128;
const RSS_LIMIT_MB = 150;
/** Our training step time over tfjs-wasm's. */
const TRAIN_RATIO = 0.5;
/** Our sampling tokens/s over tfjs-wasm's. */
const SAMPLE_RATIO = 10;

/** The tfjs model fed the same batch as {@link OurEngine}, as typed arrays built once. */
class TfjsSide {
  private readonly model: TfjsTransformer;
  private readonly inputs: Int32Array;
  private readonly targets: Int32Array;
  private readonly weights: Float32Array;
  private sampleSeed = SEED;

  constructor(
    tf: Tf,
    dModel: number,
    private readonly prompt: number[],
    private readonly eosId: number,
  ) {
    this.model = new TfjsTransformer(
      tf,
      { vocabSize: VOCAB_SIZE, dModel, ...SHAPE },
      { learningRate: ADAM.learningRate, beta1: ADAM.beta1, beta2: ADAM.beta2, eps: ADAM.eps },
      SEED,
    );
    const batch = trainingBatch();
    this.inputs = Int32Array.from(batch.flatMap((s) => s.inputs));
    this.targets = Int32Array.from(batch.flatMap((s) => s.targets));
    this.weights = Float32Array.from(batch.flatMap((s) => s.weights));
  }

  trainStep(): number {
    return this.model.trainStep(this.inputs, this.targets, this.weights, BATCH, SEQ_LEN);
  }

  sample(): number {
    return this.model.sample(this.prompt, MAX_TOKENS, NUM_SAMPLES, this.sampleSeed++, this.eosId);
  }

  dispose(): void {
    this.model.dispose();
  }
}

/**
 * The report-only rows of a preset on its own workload (no baseline runs it in this process):
 * training step time and tokens/s, sampling tokens/s, and the peak RSS of a process doing both.
 */
async function* presetRows(
  ctx: SuiteContext,
  workload: PresetWorkload,
  samplesMs: Record<string, { ours: number[]; tfjs: number[] }>,
): AsyncIterable<Row> {
  const name = workload.preset;
  const rounds = PRESET_ROUNDS[name];
  ctx.setup(name, { ...workload, train: rounds.train, sample: rounds.sample });
  const engine = OurEngine.forPreset(workload);
  try {
    ctx.log(`train_step_${name}: timing`);
    const train = await sideBySide({ ours: () => (engine.trainStep(), 1) }, rounds.train);
    samplesMs[`train_step_${name}`] = { ours: train.ours.samplesMs, tfjs: [] };
    yield reportRow(`train_step_${name}`, "ms/step", train.ours.medianMs);
    yield reportRow(
      `train_tokens_per_s_${name}`,
      "tokens/s",
      (workload.batch * workload.seqLen * 1000) / train.ours.medianMs,
    );
    ctx.log(`sample_tokens_per_s_${name}: timing`);
    const sample = await sideBySide({ ours: () => engine.sample() }, rounds.sample);
    samplesMs[`sample_tokens_per_s_${name}`] = { ours: sample.ours.samplesMs, tfjs: [] };
    yield reportRow(`sample_tokens_per_s_${name}`, "tokens/s", sample.ours.perSecond);
  } finally {
    await engine.dispose();
  }
  ctx.log(`peak_rss_${name}_mb: child process`);
  yield reportRow(`peak_rss_${name}_mb`, "MB", await childPeakRssMb([name]));
}

/** Peak RSS in MiB of a fresh process running rss-child.ts with `args` (a width, a preset, or none). */
function childPeakRssMb(args: string[]): Promise<number> {
  const script = fileURLToPath(new URL("../engine/rss-child.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    // fork() reuses this process's execArgv, which carries tsx's loader flags.
    const child = fork(script, args, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    let peak: number | undefined;
    child.on("message", (m: { maxRssMb: number }) => (peak = m.maxRssMb));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 && peak !== undefined ? resolve(peak) : reject(new Error(`rss child exited with code ${code}`)),
    );
  });
}

export const suite: Suite = {
  description: `engine vs tfjs-wasm: d_model ${D_MODELS.join("/")}, ${SHAPE.nLayers} layers, ${SHAPE.nHeads} heads, batch ${BATCH}×${SEQ_LEN}; then the medium and large presets alone; then vs PyTorch on d64, d128, small, medium`,
  async *run(ctx): AsyncIterable<Row> {
    const { tf, description } = await loadTfjs(ctx.log);
    ctx.setup("baseline", description);
    ctx.setup("model", { ...SHAPE, dModels: D_MODELS, vocabSize: VOCAB_SIZE });
    ctx.setup("train", { batch: BATCH, seqLen: SEQ_LEN, loss: "cross_entropy", adam: ADAM, ...TRAIN });
    ctx.setup("sample", { numSamples: NUM_SAMPLES, maxTokens: MAX_TOKENS, temperature: 1, ...SAMPLE });

    const sides = D_MODELS.map((d) => {
      const ours = new OurEngine(d);
      return { d, ours, tfjs: new TfjsSide(tf, d, ours.prompt, ours.eosId) };
    });
    const ourCompute = sides[0]!.ours.compute;
    ctx.setup("ours", ourCompute);
    // Every timed call, so a reader can judge the noise behind each median.
    const samplesMs: Record<string, { ours: number[]; tfjs: number[] }> = {};
    ctx.setup("samples_ms", samplesMs);
    try {
      const firstLoss: Record<string, { ours: number; tfjs: number }> = {};
      for (const { d, ours, tfjs } of sides) {
        // Both start from a random init on the same batch, so their first losses should agree (≈ ln 259 per weighted token).
        firstLoss[`d${d}`] = { ours: ours.trainStep(), tfjs: tfjs.trainStep() };
        ctx.log(`train_step_d${d}: timing`);
        const t = await sideBySide(
          {
            ours: () => {
              ours.trainStep();
              return 1;
            },
            tfjs: () => {
              tfjs.trainStep();
              return 1;
            },
          },
          TRAIN,
        );
        samplesMs[`train_step_d${d}`] = { ours: t.ours.samplesMs, tfjs: t.tfjs.samplesMs };
        yield comparedRow(`train_step_d${d}`, "ms/step", t.ours.medianMs, t.tfjs.medianMs, {
          op: "<=",
          bound: TRAIN_RATIO,
        });
      }
      ctx.setup("first_loss_sum", firstLoss);
      // EOS ends a sample early on either side; the tokens actually generated show the work was alike.
      const tokensPerRequest: Record<string, { ours: number[]; tfjs: number[] }> = {};
      for (const { d, ours, tfjs } of sides) {
        ctx.log(`sample_tokens_per_s_d${d}: timing`);
        const t = await sideBySide({ ours: () => ours.sample(), tfjs: () => tfjs.sample() }, SAMPLE);
        tokensPerRequest[`d${d}`] = { ours: t.ours.units, tfjs: t.tfjs.units };
        samplesMs[`sample_tokens_per_s_d${d}`] = { ours: t.ours.samplesMs, tfjs: t.tfjs.samplesMs };
        ctx.setup("sample_tokens_per_request", tokensPerRequest);
        yield comparedRow(`sample_tokens_per_s_d${d}`, "tokens/s", t.ours.perSecond, t.tfjs.perSecond, {
          op: ">=",
          bound: SAMPLE_RATIO,
        });
      }
    } finally {
      for (const { ours, tfjs } of sides) {
        await ours.dispose();
        tfjs.dispose();
      }
    }

    ctx.log(`peak_rss_d${RSS_D_MODEL}_mb: child process`);
    ctx.setup("runtime_floor_rss_mb", await childPeakRssMb([]));
    yield targetRow(`peak_rss_d${RSS_D_MODEL}_mb`, "MB", await childPeakRssMb([String(RSS_D_MODEL)]), {
      op: "<=",
      bound: RSS_LIMIT_MB,
    });

    for (const workload of [MEDIUM, LARGE]) yield* presetRows(ctx, workload, samplesMs);

    yield* torchRows(ctx, ourCompute.threads);
  },
};
