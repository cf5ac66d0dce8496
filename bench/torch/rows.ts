/**
 * The engine suite's PyTorch rows: per shape, our training step time over PyTorch's (target
 * ≤ 0.8) and our sampling tokens/s over PyTorch's (≥ 2), timed side by side in alternation,
 * each side in its own process; and whether both sides compute the same losses from the same
 * weights. Without PyTorch (no apt, no root, a failed install) the rows are skipped with a note.
 */
import { OurEngine } from "../engine/ours.js";
import {
  ADAM,
  BATCH,
  MAX_TOKENS,
  NUM_SAMPLES,
  SEED,
  SEQ_LEN,
  MEDIUM,
  SMALL,
  trainingBatch,
} from "../engine/workload.js";
import { comparedRow, targetRow, type Row, type SuiteContext } from "../lib/suite.js";
import { sideBySide, type Timing } from "../lib/timing.js";
import { TorchBaseline } from "./baseline.js";

/** Our training step time over PyTorch's (issue 30). */
const TRAIN_RATIO = 0.8;
/** Our sampling tokens/s over PyTorch's (issue 30). */
const SAMPLE_RATIO = 2;
/** Largest relative difference of the first losses, in parts per million (float32 sums of ~1000 tokens). */
const LOSS_PPM = 100;

const SHAPES = [
  { name: "d64", model: 64, batch: BATCH, seqLen: SEQ_LEN, maxTokens: MAX_TOKENS },
  { name: "d128", model: 128, batch: BATCH, seqLen: SEQ_LEN, maxTokens: MAX_TOKENS },
  { name: SMALL.preset, model: SMALL.preset, ...SMALL },
  { name: MEDIUM.preset, model: MEDIUM.preset, ...MEDIUM },
] as const;

/** Warm-up and timed rounds: fewer for the presets, whose steps take seconds. */
function rounds(shape: (typeof SHAPES)[number]): {
  train: { warmup: number; runs: number };
  sample: { warmup: number; runs: number };
} {
  return typeof shape.model === "number"
    ? { train: { warmup: 2, runs: 7 }, sample: { warmup: 1, runs: 5 } }
    : { train: { warmup: 1, runs: 5 }, sample: { warmup: 1, runs: 3 } };
}

/** Min and max over rounds of ours / PyTorch, by time, or with `perSecond` by units per second. */
function roundRatios(t: Record<"ours" | "torch", Timing>, perSecond: boolean): [number, number] {
  const rate = (s: Timing, i: number) => (perSecond ? (s.units[i]! * 1000) / s.samplesMs[i]! : s.samplesMs[i]!);
  const ratios = t.ours.samplesMs.map((_, i) => rate(t.ours, i) / rate(t.torch, i));
  return [Math.min(...ratios), Math.max(...ratios)];
}

/** |a − b| / |b| in parts per million. */
function ppm(a: number, b: number): number {
  return (Math.abs(a - b) / Math.abs(b)) * 1e6;
}

/**
 * Measures every shape against PyTorch running on `threads` threads (our engine's count).
 * @yields the rows; records the baseline, per-round ratio ranges, and both sides' losses in `setup`.
 */
export async function* torchRows(ctx: SuiteContext, threads: number): AsyncIterable<Row> {
  const start = TorchBaseline.start(threads, ctx.log);
  if (!start.ok) {
    ctx.note(`PyTorch rows skipped: ${start.reason}`);
    ctx.setup("torch", { skipped: start.reason });
    return;
  }
  const torch = start.torch;
  const setup: Record<string, unknown> = {
    shapes: SHAPES.map((s) => ({ ...s, rounds: rounds(s) })),
    threads,
    ratio_range_by_row: {},
    losses: {},
  };
  ctx.setup("torch", setup);
  const ranges = setup["ratio_range_by_row"] as Record<string, [number, number]>;
  const range = (row: string, r: [number, number]) => {
    ranges[row] = r;
    ctx.note(`${row}: per-round ratios ${r[0].toFixed(3)}–${r[1].toFixed(3)}`);
  };
  const losses = setup["losses"] as Record<string, { ours: number[]; torch: number[]; max_ppm: number }>;
  const firstLossPpm: number[] = [];
  try {
    for (const shape of SHAPES) {
      const ours = new OurEngine(shape.model, trainingBatch(shape.batch, shape.seqLen), shape.maxTokens);
      try {
        await torch.load(
          {
            config: ours.config,
            weights: ours.getWeights(),
            batch: trainingBatch(shape.batch, shape.seqLen),
            adam: ADAM,
            prompt: ours.prompt,
            maxTokens: shape.maxTokens,
            numSamples: NUM_SAMPLES,
            eosId: ours.eosId,
            seed: SEED,
          },
          threads,
        );
        setup["baseline"] = torch.description;
        const { train, sample } = rounds(shape);
        // Both sides take the same steps from the same weights, so their losses should agree step by step.
        const loss = { ours: [] as number[], torch: [] as number[], max_ppm: 0 };
        losses[shape.name] = loss;
        ctx.log(`train_step_${shape.name}_torch: timing`);
        const t = await sideBySide(
          {
            ours: () => (loss.ours.push(ours.trainStep()), 1),
            torch: async () => {
              const step = await torch.trainStep();
              loss.torch.push(step.loss);
              return step;
            },
          },
          train,
        );
        loss.max_ppm = Math.max(...loss.ours.map((l, i) => ppm(l, loss.torch[i]!)));
        firstLossPpm.push(ppm(loss.ours[0]!, loss.torch[0]!));
        range(`train_step_${shape.name}_torch`, roundRatios(t, false));
        yield comparedRow(`train_step_${shape.name}_torch`, "ms/step", t.ours.medianMs, t.torch.medianMs, {
          op: "<=",
          bound: TRAIN_RATIO,
        });

        ctx.log(`sample_tokens_per_s_${shape.name}_torch: timing`);
        const s = await sideBySide({ ours: () => ours.sample(), torch: () => torch.sample() }, sample);
        range(`sample_tokens_per_s_${shape.name}_torch`, roundRatios(s, true));
        yield comparedRow(`sample_tokens_per_s_${shape.name}_torch`, "tokens/s", s.ours.perSecond, s.torch.perSecond, {
          op: ">=",
          bound: SAMPLE_RATIO,
        });
      } finally {
        await ours.dispose();
      }
    }
  } finally {
    torch.close();
  }
  // The forward of the first step alone: later steps also check backward and AdamW (setup.torch.losses).
  yield targetRow("torch_first_loss_diff", "ppm", Math.max(...firstLossPpm), { op: "<=", bound: LOSS_PPM });
}
