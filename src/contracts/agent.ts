/**
 * The agent contract: the function a user writes for `rollout_worker.type: agent`, what it is
 * given ({@link AgentContext}) and what it returns ({@link AgentResult}).
 * @module
 */
import type OpenAI from "openai";
import type { RolloutTask } from "./task.js";
import type { ChatMessage } from "../wire/tokenizer.js";

/** What an agent receives besides its task. */
export interface AgentContext {
  /** An OpenAI client whose base URL is this episode's gateway URL (no retries). */
  openai: OpenAI;
  /** The episode's OpenAI-compatible base URL (ends in `/v1`), for agents that build their own client. */
  baseURL: string;
  /** The model name to send (the gateway serves the policy whatever name is sent). */
  model: string;
  /** Aborted when the episode times out or the run stops. */
  signal: AbortSignal;
}

/**
 * What an agent returns as an object. Every field is optional; the evaluator receives the whole
 * object as `result`, other fields included. `final_answer` keeps NexAU's spelling; `finalAnswer`
 * and `answer` are read too, in that order.
 */
export interface AgentEpisodeResult {
  /** The final answer (else the model's last reply is). */
  final_answer?: string;
  /** The final answer, when `final_answer` is not given. */
  finalAnswer?: string;
  /** The final answer, when neither of the above is given. */
  answer?: string;
  /** The episode's reward, used when no evaluator is configured. */
  reward?: number;
  /** The conversation as the agent last saw it (OpenAI chat messages), for the evaluator. */
  history?: ReadonlyArray<ChatMessage | OpenAI.ChatCompletionMessageParam>;
  /** True when the agent stopped before it finished (its turns ran out): the episode counts as truncated. */
  truncated?: boolean;
  /** Anything else, passed to the evaluator as part of `result`. */
  [key: string]: unknown;
}

/**
 * What an agent returns: its final answer as a string, an {@link AgentEpisodeResult}, or nothing
 * (the model's last reply is the final answer).
 */
export type AgentResult = string | AgentEpisodeResult | undefined | void;

/**
 * An agent: runs one task and returns its {@link AgentResult} (or a promise of it).
 */
export type AgentFunction = (task: RolloutTask, context: AgentContext) => AgentResult | Promise<AgentResult>;
