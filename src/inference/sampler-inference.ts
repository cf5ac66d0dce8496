import { decodeTolerantly, encodePrompt, type ChatMessage, type Tokenizer } from "../wire/tokenizer.js";
import { modelInputFromTokens } from "../wire/wire.js";
import type { SamplingClient } from "../contracts/training.js";
import type { InferenceClient, InferenceOptions, InferenceResult } from "../contracts/inference.js";
import { NexrlError } from "../errors.js";

/** Options of {@link SamplerInferenceClient}. */
export interface SamplerInferenceClientOptions {
  /** The tokenizer of the sampled model. */
  tokenizer: Tokenizer;
  /** The sampler to start with. */
  samplingClient: SamplingClient;
  /** Policy version of that sampler (0 for the base model). */
  policyVersion?: number;
  /** `maxTokens` when a call gives none (default 256). */
  defaultMaxTokens?: number;
}

/**
 * An {@link InferenceClient} over a training service's {@link SamplingClient}. Weight sync swaps
 * the sampler with {@link SamplerInferenceClient.setSampler}; calls already running finish on the
 * sampler they started with, and each result reports the policy version that produced it.
 */
export class SamplerInferenceClient implements InferenceClient {
  /** The tokenizer of the sampled model. */
  readonly tokenizer: Tokenizer;
  private sampler: SamplingClient;
  private version: number;
  private readonly defaultMaxTokens: number;

  /** @param options tokenizer, first sampler and defaults. */
  constructor(options: SamplerInferenceClientOptions) {
    this.tokenizer = options.tokenizer;
    this.sampler = options.samplingClient;
    this.version = options.policyVersion ?? 0;
    this.defaultMaxTokens = options.defaultMaxTokens ?? 256;
  }

  /** Version of the weights new calls sample from. */
  get policyVersion(): number {
    return this.version;
  }

  /** Points new calls at `samplingClient`, which serves the weights of `policyVersion`. */
  setSampler(samplingClient: SamplingClient, policyVersion: number): void {
    this.sampler = samplingClient;
    this.version = policyVersion;
  }

  /** Continues `prompt`; text is encoded with BOS ({@link encodePrompt}), token ids are used as they are. */
  completion(prompt: string | number[], options: InferenceOptions = {}): Promise<InferenceResult> {
    const tokens = typeof prompt === "string" ? encodePrompt(this.tokenizer, prompt) : prompt;
    return this.generate(tokens, options);
  }

  /** Answers a conversation, formatted with the tokenizer's chat template (with `options.tools` and `options.chatTemplateKwargs`). */
  chat(messages: readonly ChatMessage[], options: InferenceOptions = {}): Promise<InferenceResult> {
    const { tools, chatTemplateKwargs } = options;
    return this.generate(
      this.tokenizer.applyChatTemplate(messages, {
        addGenerationPrompt: true,
        ...(tools && { tools }),
        ...(chatTemplateKwargs && { chatTemplateKwargs }),
      }),
      options,
    );
  }

  private async generate(promptTokens: number[], options: InferenceOptions): Promise<InferenceResult> {
    options.signal?.throwIfAborted();
    const sampler = this.sampler;
    const policyVersion = this.version;
    const future = await sampler.sample(modelInputFromTokens(promptTokens), 1, {
      maxTokens: options.maxTokens ?? this.defaultMaxTokens,
      ...(options.temperature !== undefined && { temperature: options.temperature }),
      ...(options.topP !== undefined && { topP: options.topP }),
      ...(options.topK !== undefined && { topK: options.topK }),
      ...((options.stop !== undefined || options.stopTokenIds !== undefined) && {
        stop: [...(options.stop ?? []), ...(options.stopTokenIds ?? [])],
      }),
      ...(options.seed !== undefined && { seed: options.seed }),
    });
    const [sequence] = (await future.result()).sequences;
    if (!sequence)
      throw new NexrlError("the sampler returned no sequence for a request of one sample; check the sampling service");
    options.signal?.throwIfAborted();
    // An id beyond the tokenizer stays in the tokens, reads as nothing, and is counted.
    const { text, unknownIds } = decodeTolerantly(this.tokenizer, sequence.tokens);
    return {
      promptTokens: [...promptTokens],
      responseTokens: sequence.tokens,
      response: text,
      ...(unknownIds > 0 && { unknownTokenIds: unknownIds }),
      logprobs: sequence.logprobs,
      finishReason: sequence.stopReason,
      policyVersion,
    };
  }
}
