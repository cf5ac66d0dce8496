/**
 * The LLM judge of the math worker (`rollout_worker.agent.math.judge_mode: llm_judge` or
 * `rule+llm_judge`, configured by `rollout_worker.judge`): one {@link LlmJudge} per run, shared
 * by every worker instance, and in `group_rank` mode a meeting point where the rollouts of a
 * group wait for each other before the judge ranks them together.
 * @module
 */
import type { JudgeConfig } from "../recipe/schema/judge.js";
import { JudgeError, NexrlError } from "../errors.js";
import type { ChatMessage } from "../wire/tokenizer.js";
import type { RolloutTask } from "../contracts/task.js";
import type { WorkerSettings } from "../contracts/worker.js";
import { LlmJudge, type JudgeItem, type JudgeVerdict } from "./llm-judge.js";

/** What a judged rollout records in `extraFields.judge` (and `samples.jsonl` shows). */
export interface JudgeRecord {
  /** `llm_judge` or `rule+llm_judge`. */
  judge_mode: string;
  /** `score` or `group_rank`. */
  mode: "score" | "group_rank";
  /** The judge model. */
  model: string;
  /** The judge's score of this answer (0 to 1), before the rule and the length cut apply. */
  score: number;
  /** Place in the group's ranking, 1 for the best (`group_rank`). */
  rank?: number;
  /** The judge's words. */
  reply: string;
  /** Attempts the request took (0 from the cache). */
  attempts: number;
  /** Whether the verdict came from the cache. */
  cached: boolean;
}

/** The rollouts of one group waiting for the judge to rank them. */
interface PendingGroup {
  readonly size: number;
  readonly items: Map<number, JudgeItem>;
  readonly waiters: Map<number, { resolve(v: JudgeVerdict): void; reject(e: unknown): void }>;
}

/** A run's judge, and the groups waiting for it in `group_rank` mode. */
export class MathJudge {
  private readonly groups = new Map<string, PendingGroup>();

  /**
   * @param judge the judge client.
   * @param mode how it judges.
   * @param judgeMode the recipe's `judge_mode`.
   */
  constructor(
    readonly judge: LlmJudge,
    readonly mode: JudgeConfig["mode"],
    readonly judgeMode: "llm_judge" | "rule+llm_judge",
  ) {}

  /**
   * The judge's verdict on the answer of `task`. In `group_rank` mode it resolves once every
   * rollout of the task's group has submitted its answer and the judge has ranked them; a
   * rollout retried after a failure submits again in place of its earlier attempt.
   * @throws JudgeError when the judge failed (every rollout of a ranked group fails with it).
   */
  verdict(task: RolloutTask, item: JudgeItem): Promise<JudgeVerdict> {
    if (this.mode === "score") return this.judge.score(item);
    let group = this.groups.get(task.groupId);
    if (!group) {
      group = { size: task.groupSize, items: new Map(), waiters: new Map() };
      this.groups.set(task.groupId, group);
    }
    const pending = group;
    const result = new Promise<JudgeVerdict>((resolve, reject) => {
      pending.items.set(task.runId, item);
      pending.waiters.set(task.runId, { resolve, reject });
    });
    if (pending.items.size === pending.size) {
      this.groups.delete(task.groupId);
      const runs = [...pending.items.keys()].sort((a, b) => a - b);
      this.judge.rank(runs.map((run) => pending.items.get(run)!)).then(
        (verdicts) => runs.forEach((run, i) => pending.waiters.get(run)!.resolve(verdicts[i]!)),
        (error: unknown) => runs.forEach((run) => pending.waiters.get(run)!.reject(error)),
      );
    }
    return result;
  }

  /**
   * Tells the group of `task` that this rollout failed before its answer reached the judge: in
   * `group_rank` mode the group can no longer be ranked, so the rollouts waiting in it fail with
   * `error` (each is then retried or skipped by the failure policy, and retries form the group
   * again) instead of waiting for an answer that may never come. Nothing to do in `score` mode.
   */
  withdraw(task: RolloutTask, error: unknown): void {
    const group = this.groups.get(task.groupId);
    if (!group) return;
    this.groups.delete(task.groupId);
    const why = new JudgeError(
      `the judge ranks the ${group.size} rollouts of group ${task.groupId} together, and run ${task.runId} failed before it answered: ${error instanceof Error ? error.message : String(error)}`,
      { reply: undefined, cause: error },
    );
    for (const [run, waiter] of group.waiters) if (run !== task.runId) waiter.reject(why);
  }
}

const judges = new WeakMap<WorkerSettings, MathJudge | null>();

/**
 * The judge of a run's worker settings, made on first use and shared by every worker given the
 * same settings; undefined when `judge_mode` is `rule`. The API key is read from the environment
 * variable `rollout_worker.judge.api_key_env`.
 * @throws NexrlError when that variable is not set.
 */
export function mathJudgeOf(settings: WorkerSettings): MathJudge | undefined {
  const known = judges.get(settings);
  if (known !== undefined) return known ?? undefined;
  const config = settings.mathJudge;
  if (config === undefined) {
    judges.set(settings, null);
    return undefined;
  }
  let apiKey: string | undefined;
  if (config.apiKeyEnv !== undefined) {
    apiKey = process.env[config.apiKeyEnv];
    if (!apiKey)
      throw new NexrlError(
        `rollout_worker.judge.api_key_env names ${config.apiKeyEnv}, which is not set: export the judge's API key in that variable`,
      );
  }
  const judge = new MathJudge(
    new LlmJudge({ ...config.judge, ...(apiKey !== undefined && { apiKey }) }),
    config.mode,
    config.judgeMode,
  );
  judges.set(settings, judge);
  return judge;
}

/** A task's prompt as the judge reads it: text as it is, chat messages one per paragraph. */
export function promptText(messages: readonly ChatMessage[]): string {
  if (messages.length === 1 && messages[0]!.role === "user") return String(messages[0]!.content);
  return messages.map((m) => `${m.role}: ${String(m.content)}`).join("\n\n");
}

/**
 * The reward of a math answer under the judge: the judge's score, or 1 for a rule match under
 * `rule+llm_judge` (in `score` mode the judge is then not asked). The judge also sees answers
 * that `max_response_length` cut short (its rubric can grade them as unfinished); a sequence cut
 * by `max_sequence_length` (`cut`) scores 0, and in `group_rank` mode is still ranked with its
 * group.
 */
export async function judgeMathAnswer(
  judge: MathJudge,
  task: RolloutTask,
  item: JudgeItem,
  outcome: { ruleMatch: boolean; cut: boolean },
): Promise<{ reward: number; record?: JudgeRecord }> {
  const ruleWins = judge.judgeMode === "rule+llm_judge" && outcome.ruleMatch && !outcome.cut;
  if (ruleWins && judge.mode === "score") return { reward: 1 };
  if (outcome.cut && judge.mode === "score") return { reward: 0 };
  const verdict = await judge.verdict(task, item);
  const record: JudgeRecord = {
    judge_mode: judge.judgeMode,
    mode: judge.mode,
    model: judge.judge.model,
    score: verdict.score,
    ...(verdict.rank !== undefined && { rank: verdict.rank }),
    reply: verdict.reply,
    attempts: verdict.attempts,
    cached: verdict.cached,
  };
  return { reward: outcome.cut ? 0 : ruleWins ? 1 : verdict.score, record };
}
