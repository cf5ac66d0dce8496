/** The math worker's judge: group meetings for `group_rank`, and how the rule and cuts combine with verdicts. */
import { describe, expect, it } from "vitest";
import { JudgeError } from "../../src/errors.js";
import { LlmJudge } from "../../src/rewards/llm-judge.js";
import { judgeMathAnswer, MathJudge } from "../../src/rewards/math-judge.js";
import { DEFAULT_GROUP_RUBRIC, DEFAULT_SCORE_RUBRIC } from "../../src/recipe/schema/judge.js";
import { task } from "../support/pipeline.js";
import { startJudge } from "../support/judge-server.js";

function mathJudge(baseUrl: string, mode: "score" | "group_rank", judgeMode: "llm_judge" | "rule+llm_judge") {
  const client = new LlmJudge({
    baseUrl,
    model: "m",
    scoreRubric: DEFAULT_SCORE_RUBRIC,
    rankRubric: DEFAULT_GROUP_RUBRIC,
    retryDelayMs: 1,
  });
  return new MathJudge(client, mode, judgeMode);
}

const item = (response: string) => ({ prompt: "What is 1 + 1?", response, groundTruth: "2" });
const run = (runId: number) => task({ groupId: "0-5", runId, groupSize: 3 });

describe("MathJudge in group_rank mode", () => {
  it("asks once, when the last rollout of the group has answered, and hands each its place", async () => {
    const judge = await startJudge(() => ({ reply: '{"ranking": [3, 1, 2]}' }));
    const m = mathJudge(judge.baseUrl, "group_rank", "llm_judge");
    const first = m.verdict(run(2), item("2"));
    const second = m.verdict(run(0), item("11"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(judge.requests).toEqual([]); // still waiting for run 1
    const third = m.verdict(run(1), item("two"));
    const verdicts = await Promise.all([first, second, third]);
    expect(verdicts.map((v) => [v.rank, v.score])).toEqual([
      [1, 1],
      [2, 0.5],
      [3, 0],
    ]);
    expect(judge.requests).toHaveLength(1);
    // Answers are shown in run order: run 0 is answer 1.
    expect(judge.requests[0]!.prompt).toContain("Answer 1:\n11\n\nAnswer 2:\ntwo\n\nAnswer 3:\n2");
  });

  it("fails the waiting rollouts when one of the group fails before answering, and a retried group is ranked", async () => {
    const judge = await startJudge(() => ({ reply: '{"ranking": [1, 2, 3]}' }));
    const m = mathJudge(judge.baseUrl, "group_rank", "llm_judge");
    const waiting = [m.verdict(run(0), item("2")), m.verdict(run(1), item("3"))];
    m.withdraw(run(2), new Error("sampler unavailable"));
    for (const w of waiting) {
      await expect(w).rejects.toThrow(JudgeError);
      await expect(w).rejects.toThrow(
        "the judge ranks the 3 rollouts of group 0-5 together, and run 2 failed before it answered: sampler unavailable",
      );
    }
    expect(judge.requests).toEqual([]);
    const again = await Promise.all([0, 1, 2].map((r) => m.verdict(run(r), item(String(r)))));
    expect(again.map((v) => v.score)).toEqual([1, 0.5, 0]);
    expect(judge.requests).toHaveLength(1);
  });

  it("fails every rollout of the group with the judge's error", async () => {
    const judge = await startJudge(() => ({ reply: "they are all fine" }));
    const m = new MathJudge(
      new LlmJudge({ baseUrl: judge.baseUrl, model: "m", scoreRubric: "", rankRubric: "{{responses}}", maxRetries: 0 }),
      "group_rank",
      "llm_judge",
    );
    const all = [0, 1, 2].map((r) => m.verdict(run(r), item(String(r))));
    for (const v of all) await expect(v).rejects.toThrow('its last reply: "they are all fine"');
  });
});

describe("judgeMathAnswer", () => {
  it("under rule+llm_judge scores a rule match 1 without asking in score mode, and asks about the rest", async () => {
    const judge = await startJudge(() => ({ reply: '{"score": 0.3}' }));
    const m = mathJudge(judge.baseUrl, "score", "rule+llm_judge");
    expect(await judgeMathAnswer(m, task(), item("2"), { ruleMatch: true, cut: false })).toEqual({ reward: 1 });
    expect(judge.requests).toEqual([]);
    const judged = await judgeMathAnswer(m, task(), item("3"), { ruleMatch: false, cut: false });
    expect(judged).toMatchObject({
      reward: 0.3,
      record: { judge_mode: "rule+llm_judge", mode: "score", model: "m", score: 0.3, reply: '{"score": 0.3}' },
    });
    // A sequence cut by max_sequence_length scores 0 and is not judged in score mode.
    expect(await judgeMathAnswer(m, task(), item("4"), { ruleMatch: false, cut: true })).toEqual({ reward: 0 });
    expect(judge.requests).toHaveLength(1);
  });

  it("in group_rank mode ranks every answer, but a rule match scores 1 and a cut sequence 0", async () => {
    const judge = await startJudge(() => ({ reply: '{"ranking": [2, 3, 1]}' }));
    const m = mathJudge(judge.baseUrl, "group_rank", "rule+llm_judge");
    const results = await Promise.all([
      judgeMathAnswer(m, run(0), item("2"), { ruleMatch: true, cut: false }),
      judgeMathAnswer(m, run(1), item("7"), { ruleMatch: false, cut: true }),
      judgeMathAnswer(m, run(2), item("9"), { ruleMatch: false, cut: false }),
    ]);
    expect(results.map((r) => [r.reward, r.record?.rank])).toEqual([
      [1, 3],
      [0, 1],
      [0.5, 2],
    ]);
  });
});
