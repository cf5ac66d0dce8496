/**
 * What the gateway records of a rollout: every model call, token-exact, with its timing.
 * @module
 */
import type { FinishReason } from "../contracts/inference.js";
import type { ChatMessage, ToolCall } from "../wire/tokenizer.js";

/** Why an episode was cut short. */
export type TruncationReason = "max_turns" | "max_tokens" | "timeout" | "context_length" | "agent_max_turns";

/** One model call of a rollout, as the model saw and produced it. */
export interface GatewayCall {
  /** Order of arrival within the rollout, from 1. */
  turn: number;
  /** The endpoint called. */
  endpoint: "chat.completions" | "messages" | "responses" | "completions";
  /** The prompt's token ids exactly as the model read them. */
  promptTokens: number[];
  /** The sampled token ids (a stop token included). */
  completionTokens: number[];
  /** Logprob of each sampled token under the sampling weights. */
  logprobs: number[];
  /** Why sampling ended (`tool_calls` when the gateway parsed tool calls out of the text). */
  finishReason: FinishReason | "tool_calls";
  /** The decoded completion, as generated (before stop strings are cut and tool calls parsed). */
  text: string;
  /** Tool calls parsed out of the text (empty for none). */
  toolCalls: ToolCall[];
  /** Tool calls the model wrote malformed (bad JSON, unknown structure, unclosed), left in the reply's content as text. */
  malformedToolCalls?: number;
  /** Chat calls: the conversation the agent sent. */
  messages?: ChatMessage[];
  /** The assistant message answered. */
  reply: {
    /** Its content (stop string cut, tool calls and reasoning removed). */
    content: string;
    /** Its tool calls. */
    toolCalls: ToolCall[];
    /** The reasoning split out of it (`reasoning_content`), when there was some. */
    reasoning?: string;
  };
  /** Version of the weights that sampled it, when the inference client reports one. */
  policyVersion?: number;
  /** Token ids the inference client re-tokenised instead of reporting them (never for a sampler). */
  retokenized?: Array<"prompt" | "response">;
  /** When the call arrived (ms since the epoch). */
  startedAt: number;
  /** How long the model took, in ms. */
  durationMs: number;
}

/** The requests of a rollout the gateway answered with an error (a wrong path, a malformed request, a limit). */
export interface FailedRequests {
  /** How many. */
  count: number;
  /** The first: its status and message, with its method and path unless the message names them (the rollout id written `{rolloutId}`). */
  first: string;
}

/** Everything recorded of one rollout once it finished. */
export interface RolloutTrace {
  /** The rollout id. */
  rolloutId: string;
  /** Its calls, by turn. */
  calls: GatewayCall[];
  /** Its requests answered with an error, when there were any. */
  failedRequests?: FailedRequests;
  /** Set when a limit cut the episode short. */
  truncation?: {
    /** Which limit. */
    reason: TruncationReason;
    /** What happened, naming the recipe key. */
    message: string;
  };
}
