/**
 * The body of `POST /trajectories`: a finished episode pushed by an agent running in another
 * process, validated field by field against the rollout it answers.
 * @module
 */
import { z } from "zod";
import { parseOpenAIRequest } from "../server/openai-protocol.js";
import type { TrajectoryInit } from "../contracts/trajectory.js";
import { ProtocolError } from "../errors.js";

const finite = z.number().refine(Number.isFinite, "must be a finite number");

const pushedTrajectory = z.strictObject({
  tokens: z.array(z.int().min(0)).min(1),
  loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
  logprobs: z.array(finite).optional(),
  reward: finite.optional(),
  extra_fields: z.record(z.string(), z.unknown()).optional(),
});

/** Shape of a `POST /trajectories` body. */
const pushSchema = z.strictObject({
  rollout_id: z.string().min(1),
  reward: finite.optional(),
  final_answer: z.string().optional(),
  trajectories: z.array(pushedTrajectory).min(1).optional(),
  extra_info: z.record(z.string(), z.unknown()).optional(),
});

/** A pushed trajectory; without a reward it takes the episode's. */
export type PushedTrajectory = Omit<TrajectoryInit, "reward"> & {
  /** Its own reward, if the pushing agent gave one. */
  reward?: number;
};

/** A validated push. */
export interface PushedEpisode {
  /** The episode's reward, when the agent scored it. */
  reward?: number;
  /** The agent's final answer, for the evaluator. */
  finalAnswer?: string;
  /** Finished trajectories; absent: build them from the calls the gateway recorded. */
  trajectories?: PushedTrajectory[];
  /** Anything else the agent reports (`extraFields.evaluation`). */
  extraInfo?: Record<string, unknown>;
}

/** What a push must satisfy for its rollout. */
export interface PushRules {
  /** Token ids must be below this. */
  vocabSize: number;
  /** Longest trajectory accepted, if limited. */
  maxSequenceLength?: number;
  /** True when nothing else can score the episode (no evaluator): a reward is required. */
  needsReward: boolean;
}

/** The rollout id of a push body, read before the rest is validated (400 when missing). */
export function pushedRolloutId(body: unknown): string {
  return parseOpenAIRequest(z.looseObject({ rollout_id: z.string().min(1) }), body).rollout_id;
}

const invalid = (param: string, message: string): ProtocolError =>
  new ProtocolError(`${param}: ${message}`, {
    status: 400,
    code: "invalid_trajectory",
    openaiType: "invalid_request_error",
    param: param,
  });

/**
 * Validates a push body against `rules`.
 * @throws {@link ProtocolError} 400 naming the field at fault: unknown keys, lengths that differ
 * from `tokens`, token ids outside the vocabulary, sequences over the length limit, or a missing
 * reward.
 */
export function parsePush(body: unknown, rules: PushRules): PushedEpisode {
  const push = parseOpenAIRequest(pushSchema, body);
  const trajectories = push.trajectories?.map((t, i): PushedTrajectory => {
    const at = `trajectories[${i}]`;
    const n = t.tokens.length;
    if (t.loss_mask.length !== n)
      throw invalid(
        `${at}.loss_mask`,
        `has ${t.loss_mask.length} values but tokens has ${n}; give one 0 or 1 per token (1 on sampled tokens)`,
      );
    if (t.logprobs && t.logprobs.length !== n)
      throw invalid(
        `${at}.logprobs`,
        `has ${t.logprobs.length} values but tokens has ${n}; give one per token (0 on prompt tokens)`,
      );
    const bad = t.tokens.findIndex((id) => id >= rules.vocabSize);
    if (bad >= 0)
      throw invalid(
        `${at}.tokens`,
        `[${bad}] is ${t.tokens[bad]}, outside the model's vocabulary 0..${rules.vocabSize - 1}`,
      );
    if (rules.maxSequenceLength !== undefined && n > rules.maxSequenceLength) {
      throw invalid(
        `${at}.tokens`,
        `has ${n} tokens, more than rollout_worker.max_sequence_length (${rules.maxSequenceLength}); cut the episode shorter`,
      );
    }
    if (!t.loss_mask.includes(1)) throw invalid(`${at}.loss_mask`, "has no 1: mark the sampled tokens to train on");
    if (t.reward === undefined && push.reward === undefined && rules.needsReward)
      throw invalid(`${at}.reward`, "is missing and the push has no reward; give one (no evaluator is configured)");
    const reward = t.reward ?? push.reward;
    return {
      tokens: t.tokens,
      lossMask: t.loss_mask,
      ...(reward !== undefined && { reward }),
      ...(t.logprobs && { logprobs: t.logprobs }),
      ...(t.extra_fields && { extraFields: t.extra_fields }),
    };
  });
  if (!trajectories && push.reward === undefined && rules.needsReward) {
    throw invalid("reward", "is missing; give the episode's reward (no evaluator is configured to score final_answer)");
  }
  return {
    ...(push.reward !== undefined && { reward: push.reward }),
    ...(push.final_answer !== undefined && { finalAnswer: push.final_answer }),
    ...(trajectories && { trajectories }),
    ...(push.extra_info && { extraInfo: push.extra_info }),
  };
}
