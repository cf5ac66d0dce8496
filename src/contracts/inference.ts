/**
 * The token-in/token-out inference interface rollout workers call, whatever serves the model: a
 * training service's sampler or an OpenAI-compatible server.
 *
 * @module
 */
import type { ChatMessage, Tokenizer, ToolCall, ToolDefinition } from "../wire/tokenizer.js";

/** Why a generation ended. */
export type FinishReason = "stop" | "length" | "abort";

/** Sampling options of one inference call. */
export interface InferenceOptions {
  /** Most tokens to generate (default: the client's). */
  maxTokens?: number;
  /** Softmax temperature; 0 is greedy (default 1). */
  temperature?: number;
  /** Nucleus sampling mass (default 1: off). */
  topP?: number;
  /** Top-k cut (default -1: off). */
  topK?: number;
  /** Stop strings. */
  stop?: string[];
  /** Token ids that stop sampling besides EOS (kept in the sample, as EOS is); vLLM's `stop_token_ids`. */
  stopTokenIds?: readonly number[];
  /** Seed for reproducible samples. */
  seed?: number;
  /** Cancels the call. */
  signal?: AbortSignal;
  /** `chat` only: tools the model may call, given to the chat template. */
  tools?: readonly ToolDefinition[];
  /** `chat` only: extra chat-template variables, such as `{ enable_thinking: false }`. */
  chatTemplateKwargs?: Record<string, unknown>;
}

/** One generation, token-exact: the ids the model saw and sampled, and their logprobs. */
export interface InferenceResult {
  /** Token ids of the prompt, exactly as the model read them. */
  promptTokens: number[];
  /** Token ids the model sampled. */
  responseTokens: number[];
  /** The decoded response (ids the tokenizer has no token for read as nothing; they stay in `responseTokens`). */
  response: string;
  /** Logprob of each response token under the sampling weights. */
  logprobs: number[];
  /** Why generation ended. */
  finishReason: FinishReason;
  /** Version of the weights that sampled it (the training step), when the client knows. */
  policyVersion?: number;
  /** Tool calls the server parsed out of the response (`chat` with `tools`). */
  toolCalls?: ToolCall[];
  /**
   * How many response ids the tokenizer has no token for (ids beyond its vocabulary that the
   * model's larger embedding can still sample); absent when there are none. Rollouts count them
   * as `rollout/unknown_token_ids`.
   */
  unknownTokenIds?: number;
  /**
   * Which token ids were re-tokenised locally because the server did not report them (only when
   * the client was allowed to); absent when every id came from the model.
   */
  retokenized?: Array<"prompt" | "response">;
}

/** What rollout workers call to sample from the policy. */
export interface InferenceClient {
  /** The tokenizer of the served model. */
  readonly tokenizer: Tokenizer;
  /**
   * Continues `prompt`: text is encoded with BOS first (`encodePrompt`, nexrl's one BOS rule, which
   * the `sft` worker trains text prompts with too); token ids are used as they are.
   */
  completion(prompt: string | number[], options?: InferenceOptions): Promise<InferenceResult>;
  /** Answers a conversation, formatted with the model's chat template. */
  chat(messages: readonly ChatMessage[], options?: InferenceOptions): Promise<InferenceResult>;
}
