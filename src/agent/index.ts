/**
 * The agent service: a recording OpenAI-compatible gateway per rollout, trace → trajectory
 * merging with prefix-break explanations, the `agent` / `nexau` rollout worker, the evaluator
 * contract, declarative (NexAU-shaped) agents, and the endpoints of agents in other processes.
 * @module
 */
export { AgentGateway, ROLLOUT_ID_HEADER, type AgentGatewayOptions } from "./gateway.js";
export { RolloutSession, type RolloutOptions } from "./session.js";
export type { FailedRequests, GatewayCall, RolloutTrace, TruncationReason } from "./trace.js";
export { mergeCalls, type MergedSequence, type MergedTrace, type MergeOptions, type PrefixBreak } from "./merge.js";
export {
  episodeTrajectories,
  type EpisodeScore,
  type EpisodeSequence,
  type EpisodeTrajectoryOptions,
  type TrajectoryWeight,
} from "./episode.js";
export { Evaluator, type EvaluationRunResult, type EvaluationTarget } from "./evaluator.js";
export { AgentRolloutWorker, type AgentWorkerSetup } from "./worker.js";
export { createAgentWorkerClass, type AgentRecipeBase } from "./worker-class.js";
export { loadAgentModule, type AgentContext, type AgentFunction, type AgentModuleBase } from "./agent-module.js";
export {
  loadAgentConfig,
  type AgentTool,
  type DeclarativeAgentConfig,
  type ToolContext,
  type ToolFunction,
} from "./declarative/config.js";
export { declarativeAgent } from "./declarative/loop.js";
export { contentWithToolCalls, formatToolCall, parseToolCalls, type ParsedToolCalls } from "./tool-calls.js";
export type { PushedEpisode, PushedTrajectory, PushRules } from "./push.js";
