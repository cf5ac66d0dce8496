/**
 * What a sampler takes and answers, and what a loss pass and an optimizer step answer, in
 * camelCase: the one shape the embedded engine, the training services (local, Tinker, Weaver)
 * and the pipeline share. The services translate it to and from their wire formats.
 *
 * @module
 */

/** Sampling parameters: Tinker's `SamplingParams` in camelCase. */
export interface SamplingParams {
  /**
   * Most tokens to generate (≥ 1). The local engine also ends generation when prompt plus output
   * reach the model's context length (stop reason `length`).
   */
  maxTokens: number;
  /** Softmax temperature; 0 samples greedily. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]; 1 (the default) disables it. */
  topP?: number;
  /** Keep the k most likely tokens; −1 or 0 keeps all (the default). */
  topK?: number;
  /**
   * Stop strings (matched on the decoded text of the generated tokens) and stop token ids. EOS
   * always stops. The tokens that complete a stop string, or the stop token, are kept in the
   * output. The local engine takes both kinds in one list; a Tinker service one kind per
   * request, and Weaver strings only.
   */
  stop?: Array<string | number>;
  /** Seed of the random stream: the same seed gives the same samples. Default: random. */
  seed?: number;
}

/** One sampled continuation. */
export interface SampledSequence {
  /** Generated token ids (the prompt excluded; the stop token included when one stopped it). */
  tokens: number[];
  /** Logprob of each generated token under the sampling weights at temperature 1, before top-k/top-p. */
  logprobs: number[];
  /**
   * `stop`: a stop token or string ended it; `length`: `maxTokens` or the context was reached;
   * `abort`: a Weaver sampler was paused (never from the local engine or Tinker).
   */
  stopReason: "stop" | "length" | "abort";
}

/** The answer to a request for `numSamples` continuations of one prompt. */
export interface SampleOutput {
  /** One sequence per requested sample, in order. */
  sequences: SampledSequence[];
}

/** Per-datum outputs of `forward` / `forwardBackward`. */
export interface LossFnOutput {
  /** The logprob of each target token under the weights before the pass. */
  logprobs: number[];
  /** Other per-position outputs a service returns (e.g. `elementwise_loss`). */
  [name: string]: number[];
}

/** The answer of `forward` and `forwardBackward`: Tinker's `ForwardBackwardOutput`. */
export interface ForwardBackwardOutput {
  /** One entry per datum, in order. */
  lossFnOutputs: LossFnOutput[];
  /** Metrics by `name:reduction` key; always has `loss:sum`, the loss summed over all datums. */
  metrics: Record<string, number>;
}

/** The answer of `optimStep`. */
export interface OptimStepOutput {
  /** Optimizer metrics by `name:reduction` key (e.g. `grad_norm:mean`), possibly empty. */
  metrics: Record<string, number>;
}
