/**
 * The inference client a worker sees during one rollout: the shared client with the rollout's
 * defaults (temperature, response length, a seed per call) and its abort signal, recording which
 * policy versions answered.
 * @module
 */
import { markSamplingError } from "./error-origin.js";
import type { ChatMessage, Tokenizer } from "../wire/tokenizer.js";
import type { InferenceClient, InferenceOptions, InferenceResult } from "../contracts/inference.js";
import { deriveSeed } from "../data/seed.js";
import { NexrlError } from "../errors.js";

/**
 * Why the calls of a rollout attempt fail once it is over. One shared reason: `abort()` without
 * one builds a DOMException, stack trace included, for every rollout.
 */
export const ATTEMPT_OVER = new NexrlError("the rollout attempt is over");

/** Defaults applied to every call unless the worker passes its own value. */
export interface RolloutSamplingDefaults {
  /** `rollout_worker.temperature`. */
  temperature: number;
  /** `rollout_worker.max_response_length`. */
  maxTokens: number;
}

/**
 * Wraps the run's {@link InferenceClient} for one rollout attempt. Call `k` of the attempt gets
 * the seed `deriveSeed(seed, k)` unless the worker gives one, so a rollout samples the same
 * tokens whenever it is replayed with the same weights.
 */
export class RolloutInferenceClient implements InferenceClient {
  private calls = 0;
  private inFlight = 0;
  private ended = false;
  private oldest: number | undefined;
  private unknown = 0;

  /**
   * @param inner the shared client.
   * @param seed the attempt's seed.
   * @param signal aborted when the attempt is abandoned (a timeout, a hang), ends with calls in
   *   flight, or the run stops: those calls then fail.
   * @param defaults sampling defaults of the recipe.
   */
  constructor(
    private readonly inner: InferenceClient,
    private readonly seed: number,
    private readonly signal: AbortSignal,
    private readonly defaults: RolloutSamplingDefaults,
  ) {}

  /** The tokenizer of the served model. */
  get tokenizer(): Tokenizer {
    return this.inner.tokenizer;
  }

  /** Sampled ids the tokenizer has no token for, in the results this rollout's worker received. */
  get unknownTokenIds(): number {
    return this.unknown;
  }

  /** Oldest policy version that answered a call of this rollout, if any reported one. */
  get oldestPolicyVersion(): number | undefined {
    return this.oldest;
  }

  /** Calls not yet answered. */
  get callsInFlight(): number {
    return this.inFlight;
  }

  /** See {@link InferenceClient.completion}. */
  completion(prompt: string | number[], options: InferenceOptions = {}): Promise<InferenceResult> {
    return this.send(options, (sent) => this.inner.completion(prompt, sent));
  }

  /** See {@link InferenceClient.chat}. */
  chat(messages: readonly ChatMessage[], options: InferenceOptions = {}): Promise<InferenceResult> {
    return this.send(options, (sent) => this.inner.chat(messages, sent));
  }

  /** Sends one call with the rollout's defaults through `call`, tracked until it settles. */
  private send(
    options: InferenceOptions,
    call: (sent: InferenceOptions) => Promise<InferenceResult>,
  ): Promise<InferenceResult> {
    let sent: InferenceOptions;
    try {
      sent = this.options(options);
    } catch (error) {
      // Refused before sending: the attempt is over or aborted.
      return Promise.reject(error);
    }
    let sending: Promise<InferenceResult>;
    try {
      sending = call(sent);
    } catch (error) {
      sending = Promise.reject(error);
    }
    return this.track(sending);
  }

  /**
   * Ends the attempt: later calls fail, and so do calls answered after it (the runner aborts
   * those still in flight).
   */
  end(): void {
    this.ended = true;
  }

  /** Counts `sending` as in flight until it settles, and notes what answered it. */
  private track(sending: Promise<InferenceResult>): Promise<InferenceResult> {
    this.inFlight++;
    // A promise chain, not an async function: see bench/README.md on frames held per call in flight.
    return sending.then(
      (result) => {
        this.inFlight--;
        return this.answered(result);
      },
      (error: unknown) => {
        this.inFlight--;
        // Sampling failed, not the worker's code: a retry of the rollout may succeed.
        markSamplingError(error);
        throw error;
      },
    );
  }

  /** `result`, once it is known that the attempt still wants it; notes what answered it. */
  private answered(result: InferenceResult): InferenceResult {
    if (this.ended) throw ATTEMPT_OVER;
    this.signal.throwIfAborted();
    this.unknown += result.unknownTokenIds ?? 0;
    if (result.policyVersion !== undefined) this.oldest = Math.min(this.oldest ?? Infinity, result.policyVersion);
    return result;
  }

  private options(options: InferenceOptions): InferenceOptions {
    if (this.ended) throw ATTEMPT_OVER;
    this.signal.throwIfAborted();
    const seed = deriveSeed(this.seed, this.calls++);
    const signal = options.signal ? AbortSignal.any([options.signal, this.signal]) : this.signal;
    return { temperature: this.defaults.temperature, maxTokens: this.defaults.maxTokens, seed, ...options, signal };
  }
}
