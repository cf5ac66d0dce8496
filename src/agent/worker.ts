/**
 * {@link AgentRolloutWorker}: the `agent` / `nexau` rollout worker. Each task is one episode of an
 * agent that talks to the policy through the agent gateway; the recorded calls become
 * trajectories and the evaluator's verdict their reward.
 * @module
 */
import OpenAI from "openai";
import { BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { type AgentOptions, type RolloutWorkerContext } from "../contracts/worker.js";
import { rowNumber, type RolloutTask } from "../contracts/task.js";
import type { ChatMessage } from "../wire/tokenizer.js";
import type { TrajectoryInit } from "../contracts/trajectory.js";
import type { AgentFunction } from "../contracts/agent.js";
import { episodeTrajectories, type EpisodeScore, type EpisodeSequence } from "./episode.js";
import type { EvaluationRunResult, EvaluationTarget, Evaluator } from "../contracts/evaluator.js";
import type { AgentGateway } from "./gateway.js";
import { mergeCalls, type PrefixBreak } from "./merge.js";
import { noRecordedCallError } from "./no-calls.js";
import type { PushedEpisode } from "./push.js";
import type { RolloutSession } from "./session.js";
import type { RolloutTrace } from "./trace.js";
import { chatFamilyOfTemplate, reasoningMismatch } from "../inference/chat-formats/index.js";
import { ConfigError, UserCodeError } from "../errors.js";

/** What every {@link AgentRolloutWorker} of a run shares. */
export interface AgentWorkerSetup {
  /** The gateway the agents talk to. */
  gateway: AgentGateway;
  /** The agent, or `external` to offer tasks to agents in other processes. */
  agent: AgentFunction | "external";
  /** Scores episodes; without one, the agent (or the pushing process) must return a reward. */
  evaluator: Evaluator | undefined;
  /** `rollout_worker.agent`, camelCase. */
  options: AgentOptions;
  /** The model name agents send. */
  modelName: string;
}

/** How the agent's run ended. */
interface Outcome {
  /** What the agent returned. */
  result?: unknown;
  /** What an external agent pushed. */
  pushed?: PushedEpisode;
  /** What the agent threw. */
  error?: unknown;
  /** The episode timeout fired first. */
  timedOut?: boolean;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The final answer: what was pushed, a string result, the result's `final_answer`/`finalAnswer`/`answer`, else the last reply. */
function finalAnswerOf(outcome: Outcome, trace: RolloutTrace): string {
  if (outcome.pushed?.finalAnswer !== undefined) return outcome.pushed.finalAnswer;
  const { result } = outcome;
  if (typeof result === "string") return result;
  if (isRecord(result)) {
    for (const key of ["final_answer", "finalAnswer", "answer"])
      if (typeof result[key] === "string") return result[key];
  }
  return trace.calls.at(-1)?.reply.content ?? "";
}

/** Text of an OpenAI message content (string, parts, or null). */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((part) => (isRecord(part) && typeof part.text === "string" ? part.text : "")).join("");
  return "";
}

/** The conversation as the model last saw it: the result's `history`, else the last chat call with its reply. */
function observationOf(result: unknown, trace: RolloutTrace): ChatMessage[] {
  if (isRecord(result) && Array.isArray(result.history)) {
    return result.history.filter(isRecord).map((m) => ({
      role: String(m.role),
      content: contentText(m.content),
      ...(Array.isArray(m.tool_calls) && { tool_calls: m.tool_calls as ChatMessage["tool_calls"] }),
      ...(typeof m.tool_call_id === "string" && { tool_call_id: m.tool_call_id }),
    }));
  }
  const last = [...trace.calls].reverse().find((c) => c.messages);
  if (!last) return [];
  const reply: ChatMessage = {
    role: "assistant",
    content: last.reply.content,
    ...(last.reply.toolCalls.length > 0 && { tool_calls: last.reply.toolCalls }),
  };
  return [...last.messages!, reply];
}

/**
 * Runs one agent episode per task through the {@link AgentGateway}:
 *
 * 1. opens a rollout in the gateway bound to this rollout's inference client (the policy, with
 *    the recipe's sampling defaults), limited to `agent.max_turns` calls, `agent.max_tokens`
 *    sampled tokens and `max_response_length` per call;
 * 2. runs the agent with `(task, { openai, baseURL, model, signal })` — or, with
 *    `agent.external`, offers the task to agents in other processes and waits for their push —
 *    cutting it short after `agent.timeout_seconds`;
 * 3. merges the recorded calls into trajectories (one per stretch of exactly continuous token
 *    history; one per call with `enable_trace_prefix_merge: false`), scores the episode with the evaluator (or the reward the agent returned or pushed),
 *    gives truncated episodes `agent.truncated_reward`, and weights the trajectories
 *    (`agent.trajectory_weight`).
 *
 * An agent that throws fails the rollout (the recipe's failure policy applies), unless a limit
 * had refused one of its calls: then the episode counts as truncated. So does an episode with no
 * recorded model call (the agent's SDK is not pointed at the base URL, or its calls all failed):
 * its failure says which, quotes the first failed request and says what to check.
 */
export class AgentRolloutWorker extends BaseRolloutWorker {
  /** What the run's agent workers share. */
  protected readonly setup: AgentWorkerSetup;

  /**
   * @param context name, settings and tokenizer, given by the pipeline.
   * @param setup gateway, agent, evaluator and options, shared by the run's workers.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} when `reasoning_parser` cannot read the format of the model's
   *   chat template (known only now, with the tokenizer).
   */
  constructor(context: RolloutWorkerContext, setup: AgentWorkerSetup) {
    super(context);
    this.setup = setup;
    const { toolParser, reasoningParser } = setup.options;
    if (reasoningParser !== undefined && toolParser === undefined) {
      const family = context.tokenizer.renderer ?? chatFamilyOfTemplate(context.tokenizer.chatTemplateText);
      const mismatch = reasoningMismatch(family, reasoningParser);
      if (mismatch)
        throw new ConfigError(
          `service.inference_service.reasoning_parser: ${mismatch} (the model's chat format is ${family}; set tool_parser to read another)`,
        );
    }
  }

  /**
   * Runs one episode of `task` and returns its trajectories.
   * @throws {@link UserCodeError} (`agent_result`) when no model call was recorded (none reached
   * the gateway, or all failed) and no limit cut the episode short, or when nothing scores it;
   * else what the agent threw.
   */
  async rollout(task: RolloutTask): Promise<TrajectoryInit[]> {
    const { options } = this.setup;
    const inference = this.inferenceClient;
    const session = this.setup.gateway.openRollout(inference, {
      maxTurns: options.maxTurns,
      ...(options.maxTokens !== undefined && { maxTokens: options.maxTokens }),
      maxTokensPerCall: this.settings.maxResponseLength,
      replayAnswers: options.replayAnswers,
      ...(options.toolParser !== undefined && { toolParser: options.toolParser }),
      ...(options.reasoningParser !== undefined && { reasoningParser: options.reasoningParser }),
    });
    let outcome: Outcome;
    let trace: RolloutTrace;
    try {
      outcome = await this.runEpisode(task, session);
    } finally {
      trace = session.finish();
    }
    // No recorded call and no limit to blame: the agent never reached the policy (or every call failed).
    const recordedNothing = trace.calls.length === 0 && !trace.truncation && !outcome.pushed?.trajectories;
    const agentKind = this.setup.agent === "external" ? "external" : "module";
    if (outcome.error !== undefined && !trace.truncation)
      throw recordedNothing && trace.failedRequests
        ? noRecordedCallError(trace, agentKind, { error: outcome.error })
        : outcome.error;
    if (recordedNothing) throw noRecordedCallError(trace, agentKind);
    let sequences: EpisodeSequence[];
    let breaks: PrefixBreak[] = [];
    if (outcome.pushed?.trajectories) {
      const version = trace.calls.reduce<number | undefined>(
        (v, c) => (c.policyVersion === undefined ? v : Math.min(v ?? Infinity, c.policyVersion)),
        undefined,
      );
      sequences = outcome.pushed.trajectories.map((t) => ({
        ...t,
        ...(version !== undefined && { policyVersion: version }),
      }));
    } else {
      ({ sequences, breaks } = mergeCalls(trace.calls, inference.tokenizer, {
        merge: this.settings.enableTracePrefixMerge,
      }));
    }
    if (sequences.length === 0) return [];
    let cut = false;
    sequences = sequences.map((seq) => {
      const t = this.truncate(seq.tokens, seq.lossMask, seq.logprobs);
      cut ||= t.truncated;
      return { ...seq, tokens: t.tokens, lossMask: t.lossMask, ...(t.logprobs && { logprobs: t.logprobs }) };
    });
    const resultTruncated = isRecord(outcome.result) && outcome.result.truncated === true;
    const truncationReason =
      trace.truncation?.reason ??
      (outcome.timedOut ? "timeout" : resultTruncated ? "agent_max_turns" : cut ? "max_sequence_length" : undefined);
    const target: EvaluationTarget = {
      finalAnswer: finalAnswerOf(outcome, trace),
      observation: observationOf(outcome.result, trace),
      isTruncated: truncationReason !== undefined,
      result: outcome.result,
    };
    const evaluation = await this.score(task, target, outcome, sequences);
    const truncated = truncationReason !== undefined;
    const score: EpisodeScore = {
      reward: truncated && options.truncatedReward !== null ? options.truncatedReward : evaluation.reward,
      finalAnswer: target.finalAnswer,
      truncated,
      ...(truncationReason !== undefined && { truncationReason }),
      ...(evaluation.metrics && { metrics: evaluation.metrics }),
      ...(evaluation.extraInfo && { extraInfo: evaluation.extraInfo }),
      ...(evaluation.groundTruth !== undefined && { groundTruth: evaluation.groundTruth }),
    };
    return episodeTrajectories(trace, sequences, breaks, score, {
      weight: options.trajectoryWeight,
      ...(this.settings.taskName !== undefined && { taskName: this.settings.taskName }),
    });
  }

  /** Runs the agent (or waits for an external push), within `agent.timeout_seconds`. */
  private async runEpisode(task: RolloutTask, session: RolloutSession): Promise<Outcome> {
    const { gateway, agent, evaluator, options, modelName } = this.setup;
    const controller = new AbortController();
    const timeoutMs = options.timeoutSeconds * 1000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Outcome>((resolve) => {
      if (timeoutMs <= 0) return;
      timer = setTimeout(() => {
        const message = session.truncate(
          "timeout",
          `the episode ran longer than rollout_worker.agent.timeout_seconds (${options.timeoutSeconds} s)`,
        );
        controller.abort(new Error(message));
        resolve({ timedOut: true });
      }, timeoutMs);
    });
    const running: Promise<Outcome> =
      agent === "external"
        ? gateway
            .offerTask(
              session,
              task,
              {
                vocabSize: session.inference.tokenizer.vocabSize,
                ...(this.settings.maxSequenceLength !== undefined && {
                  maxSequenceLength: this.settings.maxSequenceLength,
                }),
                needsReward: evaluator === undefined,
              },
              controller.signal,
            )
            .then((pushed) => ({ pushed }))
        : Promise.resolve()
            .then(() =>
              agent(task, {
                openai: new OpenAI({ baseURL: session.baseURL, apiKey: "nexrl-gateway", maxRetries: 0 }),
                baseURL: session.baseURL,
                model: modelName,
                signal: controller.signal,
              }),
            )
            .then((result) => ({ result }));
    try {
      return await Promise.race([running.catch((error: unknown) => ({ error })), timeout]);
    } finally {
      clearTimeout(timer);
      controller.abort(new Error("the episode ended"));
    }
  }

  /**
   * The episode's reward and evaluation: a pushed reward, else the evaluator's verdict, else the
   * agent's `reward`, else the pushed trajectories' own rewards.
   */
  private async score(
    task: RolloutTask,
    target: EvaluationTarget,
    outcome: Outcome,
    sequences: readonly EpisodeSequence[],
  ): Promise<EvaluationRunResult> {
    const pushed = outcome.pushed;
    if (pushed?.reward !== undefined)
      return { reward: pushed.reward, ...(pushed.extraInfo && { extraInfo: pushed.extraInfo }) };
    const evaluator = this.setup.evaluator;
    if (evaluator) {
      const verdict = await this.evaluate(evaluator, task, target);
      if (!isRecord(verdict) || typeof verdict.reward !== "number" || !Number.isFinite(verdict.reward)) {
        throw new UserCodeError(
          `${evaluator.constructor.name}.evaluate returned ${JSON.stringify(verdict)} for row ${rowNumber(task)}; return { reward: <finite number>, extraInfo?: {...} }`,
          { code: "agent_result" },
        );
      }
      return {
        ...(verdict as unknown as EvaluationRunResult),
        ...(pushed?.extraInfo && {
          extraInfo: { ...pushed.extraInfo, ...(verdict.extraInfo as Record<string, unknown> | undefined) },
        }),
      };
    }
    const { result } = outcome;
    if (isRecord(result) && typeof result.reward === "number" && Number.isFinite(result.reward))
      return { reward: result.reward };
    const own = sequences[0]?.reward;
    if (own !== undefined) return { reward: own };
    throw new UserCodeError(
      `the episode of row ${rowNumber(task)} has no reward: no evaluator is configured and the agent returned ${outcome.result === undefined ? "nothing" : typeof outcome.result === "string" ? "a string" : "no finite `reward`"}; set rollout_worker.evaluator_module_path: file.ts:MyEvaluator, or return { final_answer, reward } from the agent`,
      { code: "agent_result" },
    );
  }

  /**
   * The evaluator's verdict on `target`, within `agent.timeout_seconds` of its own, and cut short
   * when the run stops: an evaluator that never settles fails the rollout instead of holding it
   * (and a stop) for the whole rollout timeout.
   * @throws {@link UserCodeError} (`timeout`) when it takes longer; the stop's reason on a stop.
   */
  private async evaluate(evaluator: Evaluator, task: RolloutTask, target: EvaluationTarget): Promise<unknown> {
    const { timeoutSeconds } = this.setup.options;
    const signal = this.signal;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const cut = new Promise<never>((_, reject) => {
      if (timeoutSeconds > 0)
        timer = setTimeout(
          () =>
            reject(
              new UserCodeError(
                `${evaluator.constructor.name}.evaluate did not settle within rollout_worker.agent.timeout_seconds (${timeoutSeconds} s) for row ${rowNumber(task)}; make it return (or throw) sooner, or raise the timeout`,
                { code: "timeout" },
              ),
            ),
          timeoutSeconds * 1000,
        );
      onAbort = () => reject(signal.reason);
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([Promise.resolve().then(() => evaluator.evaluate(task.data, target)), cut]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort!);
    }
  }
}
