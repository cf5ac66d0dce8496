/**
 * The engine benchmark's workload, shared by both sides and by the RSS child so that every
 * number compares the same work: the same shapes, tokens, loss weights, optimizer settings and
 * sampling request.
 */
import { adamParams, type AdamParams } from "../../dist/wire/wire.js";

export const SHAPE = { nLayers: 2, nHeads: 4, contextLength: 64 } as const;
export const D_MODELS = [64, 128] as const;
export const VOCAB_SIZE = 259;
export const SEED = 1;

/** Training batch: 16 sequences of 64 positions. */
export const BATCH = 16;
export const SEQ_LEN = 64;
/** Positions whose weight is 0, as a prompt is in SFT, so per-token weights are exercised. */
const PROMPT_POSITIONS = 8;

/** Sampling: 16 samples of one 8-token prompt, 56 new tokens each, filling the 64-token context. */
export const NUM_SAMPLES = 16;
export const MAX_TOKENS = 56;

/**
 * The `medium` preset (tfjs does not run it; PyTorch does): a training batch of 8 sequences of 256 positions,
 * and 16 samples of 248 tokens after the same 8-token prompt, filling its 256-token context.
 */
export const MEDIUM = { preset: "medium", batch: 8, seqLen: 256, maxTokens: 248, numSamples: NUM_SAMPLES } as const;
/** The `small` preset (context 256, as `medium`) on `medium`'s workload; only the PyTorch baseline runs it. */
export const SMALL = { ...MEDIUM, preset: "small" } as const;
/**
 * The `large` preset, reported only: 4 sequences of 512 positions (a step takes seconds on two
 * cores) and 4 samples of 248 tokens.
 */
export const LARGE = { preset: "large", batch: 4, seqLen: 512, maxTokens: 248, numSamples: 4 } as const;
/** A preset's workload: its training batch and its sampling request. */
export type PresetWorkload = typeof MEDIUM | typeof LARGE;

export const ADAM: AdamParams = adamParams({ learningRate: 1e-3 });

const TEXT =
  "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age " +
  "of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season " +
  "of Light, it was the season of Darkness, it was the spring of hope, it was the winter of despair.";

/** One training sequence: `inputs[i]` predicts `targets[i]` with weight `weights[i]`. */
export interface Sequence {
  inputs: number[];
  targets: number[];
  weights: number[];
}

/** `batch` byte-token windows of `seqLen` positions of the text, each shifted by one for its targets. */
export function trainingBatch(batch = BATCH, seqLen = SEQ_LEN): Sequence[] {
  const bytes = [...Buffer.from(TEXT.repeat(Math.ceil((batch * 11 + seqLen + 1) / TEXT.length)))];
  return Array.from({ length: batch }, (_, b) => {
    const window = bytes.slice(b * 11, b * 11 + seqLen + 1);
    return {
      inputs: window.slice(0, seqLen),
      targets: window.slice(1),
      weights: window.slice(1).map((_, i) => (i < PROMPT_POSITIONS ? 0 : 1)),
    };
  });
}

/** BOS followed by 7 bytes of text. */
export function samplingPrompt(bosId: number): number[] {
  return [bosId, ...Buffer.from("It was ")];
}
