/**
 * A scored episode → trajectories: every trajectory carries the episode's reward, a loss weight
 * that keeps long episodes from dominating, what the gateway recorded of its calls, and the
 * explanation of every break in token continuity.
 * @module
 */
import type { TrajectoryInit } from "../contracts/trajectory.js";
import type { PrefixBreak } from "./merge.js";
import type { SampleCall, SampleDiagnostic } from "../outputs/samples.js";
import type { GatewayCall, RolloutTrace } from "./trace.js";

/** How an episode's trajectories share the loss (`rollout_worker.agent.trajectory_weight`). */
export type TrajectoryWeight = "inverse_count" | "one";

/** One sequence of the episode: merged from recorded calls, or pushed by an external agent. */
export interface EpisodeSequence {
  /** The tokens. */
  tokens: number[];
  /** 1 on sampled tokens. */
  lossMask: number[];
  /** Sampler logprobs (0 off the mask), when known. */
  logprobs?: number[];
  /** Turns merged into it (recorded calls only). */
  turns?: number[];
  /** Oldest policy version that sampled it, when known. */
  policyVersion?: number;
  /** Its own reward (pushed trajectories may give one); else the episode's. */
  reward?: number;
  /** Fields pushed with it. */
  extraFields?: Record<string, unknown>;
}

/** How an episode went and what it scored. */
export interface EpisodeScore {
  /** The episode's reward (after the truncation rule). */
  reward: number;
  /** The agent's final answer. */
  finalAnswer: string;
  /** Whether a limit cut it short. */
  truncated: boolean;
  /** Why, when it was. */
  truncationReason?: string;
  /** The evaluator's metrics (averaged per step as `rollout/score/<key>_mean`). */
  metrics?: Record<string, number>;
  /** The evaluator's or pushing agent's extra information. */
  extraInfo?: Record<string, unknown>;
  /** The expected answer, when the evaluator gave it. */
  groundTruth?: string;
}

/** Options of {@link episodeTrajectories}. */
export interface EpisodeTrajectoryOptions {
  /** How trajectories share the loss. */
  weight: TrajectoryWeight;
  /** `rollout_worker.task_name`. */
  taskName?: string;
}

/** A prefix break as written to `samples.jsonl` (`diagnostics`). */
function breakDiagnostic(b: PrefixBreak): SampleDiagnostic {
  return {
    kind: "prefix_break",
    message: `turn ${b.turn} does not continue turn ${b.previousTurn}: they first differ at token ${b.firstDifferingIndex} (expected ${b.expectedToken ?? "end"}, got ${b.actualToken ?? "end"}); a new trajectory starts here`,
    turn: b.turn,
    previous_turn: b.previousTurn,
    first_differing_index: b.firstDifferingIndex,
    expected_token: b.expectedToken,
    actual_token: b.actualToken,
    context: b.context,
    expected: b.expected,
    actual: b.actual,
  };
}

function callSummary(call: GatewayCall): SampleCall {
  return {
    turn: call.turn,
    endpoint: call.endpoint,
    prompt_tokens: call.promptTokens.length,
    completion_tokens: call.completionTokens.length,
    finish_reason: call.finishReason,
    tool_calls: call.toolCalls.map((c) => c.function.name),
    ...(call.malformedToolCalls !== undefined && { malformed_tool_calls: call.malformedToolCalls }),
    started_at: new Date(call.startedAt).toISOString(),
    duration_ms: Math.round(call.durationMs),
    ...(call.policyVersion !== undefined && { policy_version: call.policyVersion }),
    ...(call.retokenized && { retokenized: call.retokenized }),
  };
}

/**
 * The trajectories of one episode. Each gets the episode's reward (or its own pushed one),
 * `lossWeight` (1 / number of trajectories for `inverse_count`),
 * `score` (`reward_score` and the evaluator's metrics), `extraFields.agent` (rollout
 * id, position in the episode, turns, truncation) and `extraFields.calls` (what was recorded of
 * each call). The first trajectory carries the episode's `agent/*` counters; a trajectory that
 * starts at a break in continuity carries its explanation in `extraFields.diagnostics`.
 */
export function episodeTrajectories(
  trace: RolloutTrace,
  sequences: readonly EpisodeSequence[],
  breaks: readonly PrefixBreak[],
  score: EpisodeScore,
  options: EpisodeTrajectoryOptions,
): TrajectoryInit[] {
  const n = sequences.length;
  const weight = options.weight === "inverse_count" && n > 0 ? 1 / n : 1;
  const counters = {
    "agent/episodes": 1,
    "agent/trajectories": n,
    "agent/calls": trace.calls.length,
    "agent/prefix_breaks": breaks.length,
    "agent/tool_calls": trace.calls.reduce((sum, c) => sum + c.toolCalls.length, 0),
    "agent/malformed_tool_calls": trace.calls.reduce((sum, c) => sum + (c.malformedToolCalls ?? 0), 0),
    "agent/truncated_episodes": score.truncated ? 1 : 0,
    "agent/retokenized_calls": trace.calls.filter((c) => c.retokenized).length,
  };
  return sequences.map((seq, j): TrajectoryInit => {
    const turns = seq.turns ?? [];
    const calls = trace.calls.filter((c) => turns.includes(c.turn));
    const diagnostics = breaks.filter((b) => b.turn === turns[0]).map(breakDiagnostic);
    return {
      tokens: seq.tokens,
      lossMask: seq.lossMask,
      reward: seq.reward ?? score.reward,
      ...(seq.logprobs && { logprobs: seq.logprobs }),
      ...(seq.policyVersion !== undefined && { policyVersion: seq.policyVersion }),
      score: { reward_score: seq.reward ?? score.reward, ...score.metrics },
      lossWeight: weight,
      ...(j === 0 && { counters }),
      extraFields: {
        ...seq.extraFields,
        agent: {
          rollout_id: trace.rolloutId,
          trajectory: j,
          trajectories: n,
          turns,
          truncated: score.truncated,
          ...(score.truncationReason !== undefined && { truncation_reason: score.truncationReason }),
        },
        calls: calls.map(callSummary),
        finish_reason: calls.at(-1)?.finishReason ?? null,
        response: score.finalAnswer,
        is_truncated: score.truncated,
        ...(score.groundTruth !== undefined && { ground_truth: score.groundTruth }),
        ...(score.extraInfo && { evaluation: score.extraInfo }),
        ...(options.taskName !== undefined && { task_name: options.taskName }),
        ...(diagnostics.length > 0 && { diagnostics }),
      },
    };
  });
}
