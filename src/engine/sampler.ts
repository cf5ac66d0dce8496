/**
 * The sampling half of the local engine: `sample` and `computeLogprobs` over one set of weights,
 * with a key/value cache.
 *
 * @module
 */
import type { ResolvedModelConfig } from "./config.js";
import { KvDecoder } from "./decoder.js";
import { ContextLengthError, SamplingParamsError, TokenIdError } from "./errors.js";
import { logSumExp } from "./layers.js";
import type { ModelTensors } from "./params.js";
import { Rng } from "./prng.js";
import { TokenChooser, type ChoiceParams } from "./token-choice.js";
import type { Tokenizer } from "../types/tokenizer.js";

/** How long {@link LocalSampler.sampleAsync} works before it gives the event loop a turn, in milliseconds. */
export const SAMPLING_SLICE_MS = 10;

/** Sampling parameters (Tinker's `SamplingParams`, camelCase). */
export interface LocalSampleOptions {
  /**
   * Maximum number of tokens to generate (≥ 1). Generation also ends when prompt plus output
   * reach the context length (stop reason `length`).
   */
  maxTokens: number;
  /** Softmax temperature; 0 is greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]; default 1 (off). */
  topP?: number;
  /** Keep the k most likely tokens; −1 or 0 (default) keeps all. */
  topK?: number;
  /**
   * Stop strings (matched on the decoded text of the generated tokens) and stop token ids. EOS
   * always stops. The tokens that complete a stop string, or the stop token, are kept in the
   * output.
   */
  stop?: Array<string | number>;
  /** Seed of the random stream; the same seed gives the same samples. Default: random. */
  seed?: number;
}

/** One generated sequence. */
export interface LocalSampledSequence {
  /** Generated token ids (the prompt excluded). */
  tokens: number[];
  /** Logprob of each generated token under the model at temperature 1, before top-k/top-p. */
  logprobs: number[];
  /** `stop`: a stop token or string ended it; `length`: maxTokens or the context was reached. */
  stopReason: "stop" | "length";
}

/** Result of {@link LocalSampler.sample}. */
export interface LocalSampleResult {
  /** One entry per requested sample. */
  sequences: LocalSampledSequence[];
}

interface ResolvedSampling extends ChoiceParams {
  maxTokens: number;
  stopIds: Set<number>;
  stopStrings: string[];
  seed: number;
}

/**
 * Samples from, and scores tokens with, one set of weights. The engine's own sampler reads its
 * live weights; a sampler made from a snapshot file keeps serving that snapshot while training
 * continues.
 *
 * Context limit: prompt plus generated tokens never exceed `contextLength`. A prompt that leaves
 * no free position is an error ({@link ContextLengthError}); otherwise generation stops at the
 * context limit with stop reason `length`, even if `maxTokens` is larger.
 */
export class LocalSampler {
  private readonly decoder: KvDecoder;
  private readonly chooser: TokenChooser;
  /** Calls that fed the decoder from position 0 so far; a paused `sampleAsync` checks it on resuming. */
  private uses = 0;

  /** @internal */
  constructor(
    weights: ModelTensors,
    /** The model's configuration. */
    readonly config: ResolvedModelConfig,
    /** The tokenizer used to decode text for stop strings. */
    readonly tokenizer: Tokenizer,
  ) {
    this.decoder = new KvDecoder(weights, config);
    this.chooser = new TokenChooser(config.vocabSize);
  }

  /**
   * Generates `numSamples` continuations of `promptTokens`, drawn one after another from one
   * random stream seeded by `options.seed`.
   * @throws {@link SamplingParamsError}, {@link TokenIdError}, {@link ContextLengthError}.
   */
  sample(promptTokens: readonly number[], options: LocalSampleOptions, numSamples = 1): LocalSampleResult {
    const steps = this.sequences(promptTokens, options, numSamples);
    let step = steps.next();
    while (!step.done) step = steps.next();
    return step.value;
  }

  /**
   * {@link LocalSampler.sample}, giving the event loop a turn about every
   * {@link SAMPLING_SLICE_MS} ms (between tokens or sequences), so that a server sampling many
   * or long sequences keeps answering other requests meanwhile. The samples are those `sample`
   * draws, even when other calls use this sampler in between; the weights must not change until
   * it resolves (a snapshot's sampler never changes).
   * @throws {@link SamplingParamsError}, {@link TokenIdError}, {@link ContextLengthError}.
   */
  async sampleAsync(
    promptTokens: readonly number[],
    options: LocalSampleOptions,
    numSamples = 1,
  ): Promise<LocalSampleResult> {
    const steps = this.sequences(promptTokens, options, numSamples);
    let step = steps.next();
    while (!step.done) {
      await new Promise((resolve) => setImmediate(resolve));
      step = steps.next();
    }
    return step.value;
  }

  /** The work of `sample`, pausing (yielding) once a time slice is used up. */
  private *sequences(
    promptTokens: readonly number[],
    options: LocalSampleOptions,
    numSamples: number,
  ): Generator<void, LocalSampleResult> {
    const params = this.resolve(options, numSamples);
    const C = this.config.contextLength;
    this.checkTokens(promptTokens, "prompt");
    if (promptTokens.length === 0)
      throw new SamplingParamsError(
        "the prompt is empty; start it with at least one token (for example the tokenizer's BOS)",
      );
    if (promptTokens.length >= C) {
      throw new ContextLengthError(
        "the prompt",
        promptTokens.length,
        C,
        "shorten it so that at least one position is left for generation",
      );
    }
    const P = promptTokens.length;
    const budget = Math.min(params.maxTokens, C - P);
    // step() always refreshes the same logits buffer.
    const logits = this.decoder.logits;
    const promptLogits = this.feed(promptTokens).slice();
    let use = this.uses;
    let sliceStart = performance.now();
    const rng = new Rng(params.seed);
    const sequences: LocalSampledSequence[] = [];
    for (let s = 0; s < numSamples; s++) {
      logits.set(promptLogits);
      const tokens: number[] = [];
      const logprobs: number[] = [];
      let stopReason: LocalSampledSequence["stopReason"] = "length";
      for (let n = 0; n < budget; n++) {
        const token = this.chooser.choose(logits, params, rng);
        tokens.push(token);
        logprobs.push(logits[token]! - logSumExp(logits, 0, logits.length));
        if (params.stopIds.has(token) || this.hitsStopString(tokens, params.stopStrings)) {
          stopReason = "stop";
          break;
        }
        if (n + 1 < budget) this.decoder.step(token, P + n);
        if (performance.now() - sliceStart >= SAMPLING_SLICE_MS) {
          yield;
          sliceStart = performance.now();
          // Another call fed the decoder meanwhile: restore the cached prompt and the tokens so far.
          if (this.uses !== use) {
            this.feed(promptTokens, n + 1 < budget ? tokens : []);
            use = this.uses;
          }
        }
      }
      sequences.push({ tokens, logprobs, stopReason });
    }
    return { sequences };
  }

  /**
   * Feeds `prompt` then `generated` from position 0 (restoring the cache a sampling call had
   * built) and returns the logits after the last token.
   */
  private feed(prompt: readonly number[], generated: readonly number[] = []): Float32Array {
    this.uses++;
    prompt.forEach((t, pos) => this.decoder.step(t, pos));
    generated.forEach((t, i) => this.decoder.step(t, prompt.length + i));
    return this.decoder.logits;
  }

  /**
   * Logprob of each token given the ones before it; index 0 is null (Tinker's
   * `compute_logprobs`).
   * @throws {@link TokenIdError}, {@link ContextLengthError}.
   */
  computeLogprobs(tokens: readonly number[]): (number | null)[] {
    this.checkTokens(tokens, "tokens");
    if (tokens.length > this.config.contextLength) {
      throw new ContextLengthError(
        "the sequence",
        tokens.length,
        this.config.contextLength,
        "score at most contextLength tokens at a time",
      );
    }
    const out: (number | null)[] = tokens.length > 0 ? [null] : [];
    this.uses++;
    for (let pos = 0; pos + 1 < tokens.length; pos++) {
      const logits = this.decoder.step(tokens[pos]!, pos);
      out.push(logits[tokens[pos + 1]!]! - logSumExp(logits, 0, logits.length));
    }
    return out;
  }

  private hitsStopString(tokens: number[], stopStrings: string[]): boolean {
    if (stopStrings.length === 0) return false;
    const text = this.tokenizer.decode(tokens);
    return stopStrings.some((s) => text.includes(s));
  }

  private checkTokens(tokens: readonly number[], what: string): void {
    const V = this.config.vocabSize;
    tokens.forEach((t, i) => {
      if (!Number.isInteger(t) || t < 0 || t >= V)
        throw new TokenIdError(`${what}[${i}] is ${t}, outside the model's vocabulary 0..${V - 1}`);
    });
  }

  private resolve(options: LocalSampleOptions, numSamples: number): ResolvedSampling {
    const {
      maxTokens,
      temperature = 1,
      topP = 1,
      topK = -1,
      stop = [],
      seed = Math.floor(Math.random() * 2 ** 32),
    } = options;
    const bad = (msg: string): never => {
      throw new SamplingParamsError(msg);
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
