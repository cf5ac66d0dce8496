/** {@link LlmJudge} against a loopback OpenAI-compatible judge. */
import { describe, expect, it } from "vitest";
import { JudgeError } from "../../src/errors.js";
import { LlmJudge, parseRanking, parseScore, renderRubric } from "../../src/rewards/llm-judge.js";
import type { LlmJudgeOptions } from "../../src/contracts/judge.js";
import { startJudge, type JudgeAnswer } from "../support/judge-server.js";

const KEY = "sk-judge-test-1f2e3d4c5b6a";
const RUBRICS = {
  scoreRubric: "Task: {{prompt}}\nReference: {{ground_truth}}\nAnswer: {{response}}\nScore it.",
  rankRubric: "Task: {{prompt}} ({{n}} answers)\n{{responses}}\nRank them.",
};

function judgeAt(baseUrl: string, options: Partial<LlmJudgeOptions> = {}): LlmJudge {
  return new LlmJudge({ baseUrl, model: "judge-1", apiKey: KEY, retryDelayMs: 1, ...RUBRICS, ...options });
}

const ITEM = { prompt: "What is 2 + 2?", response: "It is 4.", groundTruth: "4" };

describe("judge replies", () => {
  it("reads a score from JSON or a `score:` line, within [0, 1]", () => {
    expect(parseScore('{"score": 0.8, "reason": "ok"}')).toEqual({ ok: true, value: 0.8 });
    expect(parseScore('Thinking {not json}. Final: {"reason": "a {b}", "score": "1"}')).toEqual({ ok: true, value: 1 });
    expect(parseScore("The answer is right.\nScore: 0.25")).toEqual({ ok: true, value: 0.25 });
    expect(parseScore("great answer!!")).toMatchObject({ ok: false, why: expect.stringContaining("no score") });
    expect(parseScore('{"score": 7}')).toEqual({ ok: false, why: "score 7 is outside [0, 1]" });
  });

  it("reads a ranking that names every answer once", () => {
    expect(parseRanking('{"ranking": [2, 3, 1]}', 3)).toEqual({ ok: true, value: [2, 3, 1] });
    expect(parseRanking("ranking: 3 > 1 > 2", 3)).toEqual({ ok: true, value: [3, 1, 2] });
    expect(parseRanking('{"ranking": [1, 1, 2]}', 3)).toMatchObject({
      ok: false,
      why: expect.stringContaining("1 to 3"),
    });
    expect(parseRanking('{"ranking": [1, 2]}', 3)).toMatchObject({ ok: false });
    expect(parseRanking("I like the second", 3)).toMatchObject({
      ok: false,
      why: expect.stringContaining("no ranking"),
    });
  });

  it("renders a rubric's placeholders", () => {
    expect(renderRubric("{{ a }}+{{b}}={{c}}", { a: "1", b: "2" })).toBe("1+2={{c}}");
  });
});

describe("LlmJudge", () => {
  it("scores an answer with the rubric, sends the key, and answers an identical prompt from its cache", async () => {
    const judge = await startJudge(() => ({ reply: '{"score": 0.75, "reason": "right but terse"}' }));
    const client = judgeAt(judge.baseUrl, { temperature: 0.3, maxTokens: 99 });
    const verdict = await client.score(ITEM);
    expect(verdict).toEqual({
      score: 0.75,
      reply: '{"score": 0.75, "reason": "right but terse"}',
      attempts: 1,
      cached: false,
    });
    expect(judge.requests).toEqual([
      {
        authorization: `Bearer ${KEY}`,
        model: "judge-1",
        prompt: "Task: What is 2 + 2?\nReference: 4\nAnswer: It is 4.\nScore it.",
        maxTokens: 99,
        temperature: 0.3,
      },
    ]);
    expect(await client.score(ITEM)).toMatchObject({ score: 0.75, attempts: 0, cached: true });
    expect(await client.score({ ...ITEM, response: "5" })).toMatchObject({ cached: false });
    expect(judge.requests).toHaveLength(2);

    const uncached = judgeAt(judge.baseUrl, { cache: false });
    await uncached.score(ITEM);
    await uncached.score(ITEM);
    expect(judge.requests).toHaveLength(4);
  });

  it("retries garbage, HTTP errors and timeouts, then takes the first usable verdict", async () => {
    const script: JudgeAnswer[] = [
      { reply: "I cannot decide." },
      { status: 503 },
      { hang: true },
      { reply: "score: 0.5" },
    ];
    const judge = await startJudge((_r, i) => script[i]!);
    const verdict = await judgeAt(judge.baseUrl, { maxRetries: 3, timeoutMs: 300 }).score(ITEM);
    expect(verdict).toMatchObject({ score: 0.5, attempts: 4, reply: "score: 0.5" });
    expect(judge.requests).toHaveLength(4);
  });

  it("fails after its retries with the judge's last words, and without the key", async () => {
    const judge = await startJudge(() => ({ reply: "Hmm, sort of right? 👍" }));
    const client = judgeAt(judge.baseUrl, { maxRetries: 2 });
    const error = await client.score(ITEM).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JudgeError);
    expect((error as JudgeError).reply).toBe("Hmm, sort of right? 👍");
    expect((error as Error).message).toBe(
      `the judge (judge-1 at ${judge.baseUrl}) gave no usable verdict in 3 attempts: no score in the reply (expected {"score": <0 to 1>}); its last reply: "Hmm, sort of right? 👍"`,
    );
    expect(judge.requests).toHaveLength(3);
    // A failure is not cached: the next identical prompt asks again.
    await expect(client.score(ITEM)).rejects.toThrow(JudgeError);
    expect(judge.requests).toHaveLength(6);
  });

  it("reports a judge that never answers as timed out", async () => {
    const judge = await startJudge(() => ({ hang: true }));
    const error = await judgeAt(judge.baseUrl, { maxRetries: 1, timeoutMs: 200 })
      .score(ITEM)
      .catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(JudgeError);
    expect((error as Error).message).toContain("gave no usable verdict in 2 attempts: a request timed out after 0.2 s");
    expect((error as JudgeError).reply).toBeUndefined();
    expect(judge.requests).toHaveLength(2);
  });

  it("keeps at most max_concurrency requests in flight", async () => {
    // The judge holds every request until two are waiting, then answers them together.
    let release: () => void = () => undefined;
    let held = 0;
    const judge = await startJudge(async () => {
      const gate = new Promise<void>((resolve) => {
        const previous = release;
        release = () => (previous(), resolve());
      });
      if (++held % 2 === 0) release();
      await gate;
      return { reply: '{"score": 1}' };
    });
    const client = judgeAt(judge.baseUrl, { maxConcurrency: 2 });
    const verdicts = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => client.score({ ...ITEM, response: `${n}` })));
    expect(verdicts.map((v) => v.score)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(judge.requests).toHaveLength(6);
    expect(judge.inFlight.max).toBe(2);
  });

  it("ranks a group: the best answer scores 1, the worst 0, evenly between; a bad ranking is retried", async () => {
    const script: JudgeAnswer[] = [
      { reply: '{"ranking": [1, 1, 2]}' },
      { reply: 'Best first: {"ranking": [2, 3, 1]}' },
    ];
    const judge = await startJudge((_r, i) => script[i]!);
    const items = ["4", "four", "5"].map((response) => ({ ...ITEM, response }));
    const verdicts = await judgeAt(judge.baseUrl).rank(items);
    expect(verdicts.map((v) => [v.rank, v.score])).toEqual([
      [3, 0],
      [1, 1],
      [2, 0.5],
    ]);
    expect(verdicts[0]).toMatchObject({ attempts: 2, reply: 'Best first: {"ranking": [2, 3, 1]}' });
    expect(judge.requests[0]!.prompt).toBe(
      "Task: What is 2 + 2? (3 answers)\nAnswer 1:\n4\n\nAnswer 2:\nfour\n\nAnswer 3:\n5\nRank them.",
    );
  });
});
