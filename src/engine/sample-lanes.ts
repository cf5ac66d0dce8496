/**
 * The per-thread loop of a sampling request: the thread takes sequences from a counter shared
 * by all threads of the request and decodes them side by side in its decoder's lanes, one
 * batched decoder call per generated position.
 *
 * Sequence i always draws from its own random stream and every row of a decoder call is
 * computed independently of the others, so its tokens do not depend on which thread decodes it,
 * next to which other sequences, nor on the number of threads.
 *
 * @module
 * @internal
 */
import type { LaneDecoder } from "./decoder.js";
import { logSumExp } from "./layers.js";
import type { MatrixKernels } from "./matrix.js";
import { Rng } from "./prng.js";
import { TokenChooser, type ChoiceParams } from "./token-choice.js";
import type { SampledSequence } from "../wire/results.js";
import type { Tokenizer } from "../wire/tokenizer.js";

/** A sampling request after its prompt was fed into lane 0 of slot 0's decoder. */
export interface SampleJob {
  /** Prompt tokens already cached in the source lane. */
  promptLength: number;
  /** Most tokens per sequence. */
  budget: number;
  numSamples: number;
  choice: ChoiceParams;
  stopIds: number[];
  stopStrings: string[];
  /** The random state each sequence starts from, 4 words per sequence. */
  streams: Uint32Array;
  /** Logits after the prompt, from which every sequence draws its first token. */
  promptLogits: Float32Array;
}

/** Where a thread finds the prompt's cache and the shared sequence counter. */
export interface LaneSources {
  /** This thread's decoder. */
  decoder: LaneDecoder;
  /** The decoder holding the prompt in lane 0 (this one on the thread that fed it). */
  promptDecoder: LaneDecoder;
  /** Whether this thread's lane 0 is the prompt's own lane. */
  ownsPrompt: boolean;
  /** Int32 word array and index of the next-sequence counter. */
  counter: Int32Array;
  counterIndex: number;
}

interface Lane {
  sequence: number;
  rng: Rng;
  tokens: number[];
  logprobs: number[];
  /** Row of the last decoder call holding this lane's logits, or −1 for the prompt's logits. */
  row: number;
}

/** Decodes sequences until the shared counter runs out; returns them with their index. */
export function sampleLanes(
  job: SampleJob,
  src: LaneSources,
  kernels: MatrixKernels,
  tokenizer: Tokenizer,
): Array<SampledSequence & { index: number }> {
  const { decoder } = src;
  const V = job.promptLogits.length;
  const P = job.promptLength;
  const chooser = new TokenChooser(V);
  const stopIds = new Set(job.stopIds);
  const rowLogits = Array.from({ length: decoder.lanes }, (_, r) => decoder.logits.subarray(r * V, (r + 1) * V));
  const laneOf = new Int32Array(decoder.lanes);
  const positions = new Int32Array(decoder.lanes);
  const tokens = new Int32Array(decoder.lanes);
  const lanes: Array<Lane | null> = [];
  const done: Array<SampledSequence & { index: number }> = [];

  const take = (lane: number): Lane | null => {
    const sequence = Atomics.add(src.counter, src.counterIndex, 1);
    if (sequence >= job.numSamples) return null;
    if (!(src.ownsPrompt && lane === 0)) decoder.copyPrefix(src.promptDecoder, 0, lane, P);
    return { sequence, rng: Rng.fromState(job.streams, 4 * sequence), tokens: [], logprobs: [], row: -1 };
  };
  for (let l = 0; l < decoder.lanes; l++) lanes.push(take(l));

  for (;;) {
    let rows = 0;
    let active = false;
    for (let l = 0; l < lanes.length; l++) {
      const lane = lanes[l];
      if (!lane) continue;
      active = true;
      const logits = lane.row < 0 ? job.promptLogits : rowLogits[lane.row]!;
      const token = chooser.choose(logits, job.choice, lane.rng);
      lane.tokens.push(token);
      lane.logprobs.push(logits[token]! - logSumExp(logits, 0, V));
      const stopped = stopIds.has(token) || hitsStopString(tokenizer, lane.tokens, job.stopStrings);
      if (stopped || lane.tokens.length >= job.budget) {
        done.push({
          index: lane.sequence,
          tokens: lane.tokens,
          logprobs: lane.logprobs,
          stopReason: stopped ? "stop" : "length",
        });
        lanes[l] = take(l);
        continue;
      }
      laneOf[rows] = l;
      positions[rows] = P + lane.tokens.length - 1;
      tokens[rows] = token;
      lane.row = rows++;
    }
    if (!active) return done;
    if (rows > 0) decoder.feed(kernels, rows, laneOf, positions, tokens, true);
  }
}

function hitsStopString(tokenizer: Tokenizer, tokens: number[], stopStrings: string[]): boolean {
  if (stopStrings.length === 0) return false;
  const text = tokenizer.decode(tokens);
  return stopStrings.some((s) => text.includes(s));
}
