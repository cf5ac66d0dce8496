/**
 * The sampling half of the local engine: `sample` and `computeLogprobs` over one set of weights,
 * with a key/value cache, the sequences of a request decoded side by side on every thread.
 *
 * @module
 */
import type { ResolvedModelConfig } from "./config.js";
import { logSumExp } from "./layers.js";
import { Rng } from "./prng.js";
import type { EngineRuntime } from "./runtime.js";
import type { SampleJob } from "./sample-lanes.js";
import { SAMPLE_COUNTER } from "./tasks.js";
import type { ChoiceParams } from "./token-choice.js";
import { appendAll } from "../wire/arrays.js";
import type { SampledSequence, SampleOutput, SamplingParams } from "../wire/results.js";
import type { Tokenizer } from "../wire/tokenizer.js";
import { ContextLengthError, InputError } from "../errors.js";

interface ResolvedSampling extends ChoiceParams {
  maxTokens: number;
  stopIds: Set<number>;
  stopStrings: string[];
  seed: number;
}

/** A checked request: its prompt, parameters and each sample's random stream (4 words apiece). */
interface SamplePlan {
  promptTokens: readonly number[];
  params: ResolvedSampling;
  streams: Uint32Array;
}

/**
 * Samples from, and scores tokens with, one set of weights. The engine's own sampler reads its
 * live weights; a sampler made from a snapshot file keeps serving that snapshot while training
 * continues.
 *
 * Context limit: prompt plus generated tokens never exceed `contextLength`. A prompt that leaves
 * no free position is an error ({@link "nexrl/errors".ContextLengthError | ContextLengthError}); otherwise generation stops at the
 * context limit with stop reason `length`, even if `maxTokens` is larger.
 */
export class LocalSampler {
  /** The model's configuration. */
  readonly config: ResolvedModelConfig;

  /** @internal */
  constructor(
    private readonly runtime: EngineRuntime,
    /** The tokenizer used to decode text for stop strings. */
    readonly tokenizer: Tokenizer,
    /** Whether {@link LocalSampler.close} releases the runtime (a snapshot sampler's own). */
    private readonly ownsRuntime: boolean,
  ) {
    this.config = runtime.spec.config;
  }

  /**
   * Generates `numSamples` continuations of `promptTokens`. Sample i draws from the random
   * stream of `options.seed` advanced by i·2⁶⁴ draws (its own substream), so the samples do not
   * depend on the number of threads, and the first one is the single sample of the same seed.
   * @throws {@link "nexrl".InputError | InputError}, {@link "nexrl".InputError | InputError}, {@link "nexrl/errors".ContextLengthError | ContextLengthError}.
   */
  sample(promptTokens: readonly number[], options: SamplingParams, numSamples = 1): SampleOutput {
    const plan = this.plan(promptTokens, options, numSamples);
    return { sequences: this.sampleRange(plan, 0, numSamples) };
  }

  /**
   * {@link LocalSampler.sample}, giving the event loop a turn between batches of sequences (a
   * batch is what the threads decode side by side), so that a server sampling many sequences
   * keeps answering other requests meanwhile. The samples are those `sample` draws, even when
   * other calls use this sampler in between (each batch feeds the prompt again); the weights must
   * not change until it resolves (a snapshot's sampler never changes).
   * @throws {@link "nexrl".InputError | InputError}, {@link "nexrl".InputError | InputError}, {@link "nexrl/errors".ContextLengthError | ContextLengthError}.
   */
  async sampleAsync(promptTokens: readonly number[], options: SamplingParams, numSamples = 1): Promise<SampleOutput> {
    const plan = this.plan(promptTokens, options, numSamples);
    const batch = this.runtime.threads * this.runtime.views.slots[0]!.decoder.lanes;
    const sequences: SampledSequence[] = [];
    for (let start = 0; start < numSamples; start += batch) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      appendAll(sequences, this.sampleRange(plan, start, Math.min(batch, numSamples - start)));
    }
    return { sequences };
  }

  /** Checks a request and draws the random stream of each of its samples. */
  private plan(promptTokens: readonly number[], options: SamplingParams, numSamples: number): SamplePlan {
    const params = this.resolve(options, numSamples);
    const C = this.config.contextLength;
    this.checkTokens(promptTokens, "prompt");
    if (promptTokens.length === 0)
      throw new InputError("the prompt is empty; start it with at least one token (for example the tokenizer's BOS)");
    if (promptTokens.length >= C) {
      throw ContextLengthError.fromLengths(
        "the prompt",
        promptTokens.length,
        C,
        "shorten it so that at least one position is left for generation",
      );
    }
    const rng = new Rng(params.seed);
    const streams = new Uint32Array(4 * numSamples);
    for (let s = 0; s < numSamples; s++) {
      if (s > 0) rng.jump();
      streams.set(rng.state(), 4 * s);
    }
    return { promptTokens, params, streams };
  }

  /** Samples `count` sequences of `plan` from sample `start` on, on every thread. */
  private sampleRange(plan: SamplePlan, start: number, count: number): SampledSequence[] {
    const { promptTokens, params } = plan;
    const P = promptTokens.length;
    const lastRow = this.feed(promptTokens, false);
    const V = this.config.vocabSize;
    const job: SampleJob = {
      promptLength: P,
      budget: Math.min(params.maxTokens, this.config.contextLength - P),
      numSamples: count,
      choice: { temperature: params.temperature, topK: params.topK, topP: params.topP },
      stopIds: [...params.stopIds],
      stopStrings: params.stopStrings,
      streams: plan.streams.subarray(4 * start, 4 * (start + count)),
      promptLogits: this.runtime.views.slots[0]!.decoder.logits.slice(lastRow * V, (lastRow + 1) * V),
    };
    Atomics.store(this.runtime.views.control, SAMPLE_COUNTER, 0);
    const threads = Math.min(this.runtime.threads, count);
    const results = this.runtime.run(
      Array.from({ length: this.runtime.threads }, (_, t) => (t < threads ? { kind: "sample", job } : null)),
    );
    const sequences: SampledSequence[] = new Array(count);
    for (const part of results) for (const { index, ...sequence } of part ?? []) sequences[index] = sequence;
    return sequences;
  }

  /**
   * Logprob of each token given the ones before it; index 0 is null (Tinker's
   * `compute_logprobs`).
   * @throws {@link "nexrl".InputError | InputError}, {@link "nexrl/errors".ContextLengthError | ContextLengthError}.
   */
  computeLogprobs(tokens: readonly number[]): (number | null)[] {
    this.checkTokens(tokens, "tokens");
    if (tokens.length > this.config.contextLength) {
      throw ContextLengthError.fromLengths(
        "the sequence",
        tokens.length,
        this.config.contextLength,
        "score at most contextLength tokens at a time",
      );
    }
    const out: (number | null)[] = tokens.length > 0 ? [null] : [];
    const V = this.config.vocabSize;
    const logits = this.runtime.views.slots[0]!.decoder.logits;
    this.feed(tokens.slice(0, -1), true, (pos, row) => {
      const o = row * V;
      out.push(logits[o + tokens[pos + 1]!]! - logSumExp(logits, o, V));
    });
    return out;
  }

  /** Releases a snapshot sampler's threads and memory; the engine's own sampler closes with the engine. */
  async close(): Promise<void> {
    if (this.ownsRuntime) await this.runtime.close();
  }

  /**
   * Feeds `tokens` at positions 0.. into lane 0 of slot 0's decoder, in calls of at most its
   * row count; `onRow(pos, row)` sees the logits of each position right after its call.
   * @returns the row of the last position in the decoder's logits.
   */
  private feed(tokens: readonly number[], withLogits: boolean, onRow?: (pos: number, row: number) => void): number {
    const decoder = this.runtime.views.slots[0]!.decoder;
    const step = decoder.maxRows;
    const lanes = new Int32Array(step);
    const positions = new Int32Array(step);
    const ids = new Int32Array(step);
    let last = 0;
    for (let first = 0; first < tokens.length; first += step) {
      const count = Math.min(step, tokens.length - first);
      for (let r = 0; r < count; r++) {
        positions[r] = first + r;
        ids[r] = tokens[first + r]!;
      }
      decoder.feed(this.runtime.kernels, count, lanes, positions, ids, withLogits || first + count === tokens.length);
      for (let r = 0; r < count; r++) onRow?.(first + r, r);
      last = count - 1;
    }
    return last;
  }

  private checkTokens(tokens: readonly number[], what: string): void {
    const V = this.config.vocabSize;
    tokens.forEach((t, i) => {
      if (!Number.isInteger(t) || t < 0 || t >= V)
        throw new InputError(`${what}[${i}] is ${t}, outside the model's vocabulary 0..${V - 1}`);
    });
  }

  private resolve(options: SamplingParams, numSamples: number): ResolvedSampling {
    const {
      maxTokens,
      temperature = 1,
      topP = 1,
      topK = -1,
      stop = [],
      seed = Math.floor(Math.random() * 2 ** 32),
    } = options;
    const bad = (msg: string): never => {
      throw new InputError(msg);
    };
    if (!Number.isInteger(maxTokens) || maxTokens < 1) bad(`maxTokens must be an integer >= 1, got ${maxTokens}`);
    if (!Number.isFinite(temperature) || temperature < 0)
      bad(`temperature must be a finite number >= 0 (0 is greedy), got ${temperature}`);
    if (!(topP > 0 && topP <= 1)) bad(`topP must be in (0, 1] (1 disables it), got ${topP}`);
    if (!Number.isInteger(topK) || topK < -1) bad(`topK must be an integer >= 1, or -1 / 0 to disable it, got ${topK}`);
    if (!Number.isFinite(seed)) bad(`seed must be a finite number, got ${seed}`);
    if (!Number.isInteger(numSamples) || numSamples < 1) bad(`numSamples must be an integer >= 1, got ${numSamples}`);
    const stopIds = new Set<number>([this.tokenizer.eosId]);
    const stopStrings: string[] = [];
    for (const s of stop) {
      if (typeof s === "string") {
        if (s.length === 0) bad("stop strings must not be empty");
        stopStrings.push(s);
      } else {
        if (!Number.isInteger(s) || s < 0 || s >= this.config.vocabSize)
          bad(`stop token id ${s} is outside the vocabulary 0..${this.config.vocabSize - 1}`);
        stopIds.add(s);
      }
    }
    return { maxTokens, temperature, topP, topK, stopIds, stopStrings, seed };
  }
}
