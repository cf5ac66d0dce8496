/**
 * `nexrl/agent`: the agent service's parts for a program of its own — the recording
 * OpenAI-compatible gateway and a rollout's session, traces and their merging into sequences
 * (with the reason a prefix broke), episodes → trajectories, evaluators, declarative
 * (NexAU-shaped) agents, the tool-call and reasoning parsers of each model family, and the
 * shapes of episodes pushed by agents in other processes. The agent function's contract
 * (`AgentFunction`, `AgentContext`, `AgentResult`) and `AgentRolloutWorker` are at the root.
 *
 * @packageDocumentation
 * @module nexrl/agent
 */

/** @category Gateway */
export { AgentGateway, ROLLOUT_ID_HEADER, type AgentGatewayOptions } from "./gateway.js";
/** @category Gateway */
export { RolloutSession, type RolloutOptions } from "./session.js";
/** @category Traces */
export type { FailedRequests, GatewayCall, RolloutTrace, TruncationReason } from "./trace.js";
/** @category Traces */
export { mergeCalls, type MergedSequence, type MergedTrace, type MergeOptions, type PrefixBreak } from "./merge.js";
/** @category Episodes */
export {
  episodeTrajectories,
  type EpisodeScore,
  type EpisodeSequence,
  type EpisodeTrajectoryOptions,
  type TrajectoryWeight,
} from "./episode.js";
/** @category Episodes */
export type { AgentEpisodeResult } from "../contracts/agent.js";
/** @category Episodes */
export type { PushedEpisode, PushedTrajectory, PushRules } from "./push.js";
/** @category Evaluators */
export { Evaluator, type EvaluationRunResult, type EvaluationTarget } from "../contracts/evaluator.js";
/** @category Workers */
export type { AgentWorkerSetup } from "./worker.js";
/** @category Declarative agents */
export {
  loadAgentConfig,
  type AgentTool,
  type DeclarativeAgentConfig,
  type SystemPromptTemplate,
  type ToolContext,
  type ToolFunction,
} from "./declarative/config.js";
/** @category Declarative agents */
export { declarativeAgent } from "./declarative/loop.js";
/** @category Tool calls */
export { parseToolCalls, formatToolCall, type ParsedToolCalls } from "./tool-calls.js";
/** @category Tool calls */
export {
  CHAT_FAMILIES,
  chatParserFor,
  REASONING_PARSERS,
  TOOL_PARSERS,
  type ChatFamily,
  type ChatFormat,
  type ChatParser,
  type ChatParserChoice,
  type ParsedReply,
  type ParseOptions,
  type ReasoningParser,
} from "../inference/chat-formats/index.js";
