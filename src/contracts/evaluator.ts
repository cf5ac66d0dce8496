/**
 * The evaluator contract of agent rollouts (NexRL's `Evaluator`): turns what an agent did into a
 * reward.
 * @module
 */
import type { DataRow } from "./task.js";
import { NEXRL_BRAND } from "../brand.js";
import type { ChatMessage } from "../wire/tokenizer.js";

/** What an evaluator judges: the agent's final answer and how it got there. */
export interface EvaluationTarget {
  /** The agent's final answer (its return value when a string, else its `final_answer`/`finalAnswer`/`answer`, else the last reply). */
  finalAnswer: string;
  /** The conversation as the model last saw it, with the last reply (NexAU's `agent.history`). */
  observation: ChatMessage[];
  /** Whether a limit (turns, tokens, time, context) cut the episode short. */
  isTruncated: boolean;
  /** What the agent returned (undefined when it threw after a limit or was pushed from another process). */
  result: unknown;
}

/** An evaluator's verdict. */
export interface EvaluationRunResult {
  /** The episode's reward. */
  reward: number;
  /** The expected answer, for logs. */
  groundTruth?: string;
  /** Numbers to average per step as `rollout/score/<key>_mean` (and `val/…` in validation). */
  metrics?: Record<string, number>;
  /** Anything else worth keeping with the trajectories (`extraFields.evaluation`). */
  extraInfo?: Record<string, unknown>;
}

/** Trims and lower-cases an answer for comparison. */
function normalize(text: string): string {
  return text.trim().toLowerCase();
}

/**
 * Scores an agent's episode. Subclass it, implement {@link Evaluator.evaluate}, and name the class
 * in `rollout_worker.evaluator_module_path: path/to/evaluator.ts:MyEvaluator` (it is constructed
 * with no arguments, once per run).
 *
 * The base implementation is an exact match (trimmed, case-insensitive) of the final answer with
 * the row's `answer`, `ground_truth` or `reward_model.ground_truth`, usable through `super`.
 *
 * @example
 * ```ts
 * import { Evaluator, type EvaluationRunResult, type EvaluationTarget } from "nexrl";
 *
 * export class ContainsAnswer extends Evaluator {
 *   override evaluate(data: Record<string, unknown>, target: EvaluationTarget): EvaluationRunResult {
 *     const expected = String(data.answer ?? "");
 *     const reward = expected !== "" && target.finalAnswer.includes(expected) ? 1 : 0;
 *     return { reward, extraInfo: { expected, response: target.finalAnswer } };
 *   }
 * }
 * ```
 */
export class Evaluator {
  /** Brand recognised by `loadUserClass` across copies of nexrl. */
  static readonly [NEXRL_BRAND] = "nexrl.Evaluator";

  /**
   * Scores one episode.
   * @param data the task's row, as read from the data file.
   * @param target the final answer, the conversation and whether the episode was truncated.
   */
  evaluate(data: Readonly<DataRow>, target: EvaluationTarget): EvaluationRunResult | Promise<EvaluationRunResult> {
    const rewardModel = data.reward_model as { ground_truth?: unknown } | undefined;
    const expected = data.answer ?? data.ground_truth ?? rewardModel?.ground_truth;
    const groundTruth = expected === undefined || expected === null ? "" : String(expected);
    const reward = groundTruth !== "" && normalize(target.finalAnswer) === normalize(groundTruth) ? 1 : 0;
    return { reward, groundTruth, extraInfo: { expected: groundTruth, response: target.finalAnswer } };
  }
}
