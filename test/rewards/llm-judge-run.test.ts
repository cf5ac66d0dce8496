/**
 * GRPO runs whose rewards come from an LLM judge (`rollout_worker.agent.math.judge_mode:
 * llm_judge`): against a loopback judge that answers fixed scores or rankings, and against
 * judges that answer garbage (`nexrl serve`'s OpenAI endpoint with an untrained model) or never
 * answer, whose rollouts fail with the judge's words in `failures.jsonl`.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RolloutError } from "../../src/errors.js";
import { runRecipe } from "../../src/index.js";
import { startServer } from "../../src/server/index.js";
import { additionRows, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { startJudge } from "../support/judge-server.js";

const KEY_ENV = "NEXRL_TEST_JUDGE_API_KEY";
const KEY = "sk-judge-run-9a8b7c6d5e4f";

afterEach(() => {
  delete process.env[KEY_ENV];
});

const readJsonl = async (path: string): Promise<Array<Record<string, unknown>>> =>
  (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

/** A short GRPO recipe of the math worker with the judge block `judge` (YAML lines under `judge:`). */
function judgeRecipe(judge: string, options: { steps?: number; judgeMode?: string; extra?: string } = {}): string {
  return `
data:
  data_files: [train.jsonl]
  batch_size: 2
  rollout_repeat_n: 4
  shuffle: false
  seed: 7
  max_prompt_length: 64
rollout_worker:
  type: single_turn_math
  num_workers: 4
  temperature: 1.0
  max_response_length: 12
  max_sequence_length: 96
  agent:
    math:
      judge_mode: ${options.judgeMode ?? "llm_judge"}
  judge:
${judge
  .trim()
  .split("\n")
  .map((line) => `    ${line.trim()}`)
  .join("\n")}
trainer:
  type: remote_api_grpo
  total_train_steps: ${options.steps ?? 2}
service:
  train_service:
    backend: local
    model: tiny
    config:
      loss_fn: importance_sampling
      learning_rate: 0.01
${options.extra ?? ""}`;
}

async function runDir(yaml: string) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(8));
  const recipe = await writeRecipe(dir, yaml);
  return { dir, recipe, out: join(dir, "out") };
}

/** Every file of a run folder as text, to check that the key appears in none. */
async function folderText(dir: string): Promise<string> {
  const names = await readdir(dir, { recursive: true, withFileTypes: true });
  const texts = await Promise.all(
    names.filter((e) => e.isFile()).map((e) => readFile(join(e.parentPath, e.name), "latin1")),
  );
  return texts.join("\n");
}

/** The answer a judge prompt shows (the rubrics below put it after `Answer:`). */
const answerIn = (prompt: string): string => prompt.slice(prompt.indexOf("Answer:") + "Answer:".length);

describe("GRPO with an LLM judge", () => {
  it("trains on the scores of a loopback judge and records its words in samples.jsonl", async () => {
    // Fixed scores: 0.75 for an answer of even length, 0.25 for odd.
    const judge = await startJudge((request) => {
      const score = answerIn(request.prompt).length % 2 === 0 ? 0.75 : 0.25;
      return { reply: `{"score": ${score}, "reason": "length ${answerIn(request.prompt).length}"}` };
    });
    process.env[KEY_ENV] = KEY;
    const { recipe, out } = await runDir(
      judgeRecipe(`
        base_url: ${judge.baseUrl}
        model: fixed-judge
        api_key_env: ${KEY_ENV}
        rubric: "Grade. Reference {{ground_truth}}. Task {{prompt}}. Answer:{{response}}"
        max_concurrency: 3
        timeout_seconds: 30
      `),
    );
    const result = await runRecipe(recipe, { outputDir: out });
    expect(result).toMatchObject({ steps: 2, stopReason: "completed" });

    // 2 steps × 2 tasks × 4 rollouts, less the answers the cache had already judged.
    expect(judge.requests.length).toBeGreaterThan(0);
    expect(judge.requests.length).toBeLessThanOrEqual(16);
    expect(new Set(judge.requests.map((r) => r.prompt)).size).toBe(judge.requests.length);
    for (const r of judge.requests) {
      expect(r).toMatchObject({ authorization: `Bearer ${KEY}`, model: "fixed-judge", temperature: 0, maxTokens: 512 });
      expect(r.prompt).toMatch(/^Grade\. Reference \d+\. Task What is \d \+ \d\?\. Answer:/);
    }
    expect(judge.inFlight.max).toBeLessThanOrEqual(3);

    const samples = await readJsonl(join(out, "samples.jsonl"));
    expect(samples.length).toBeGreaterThan(0);
    for (const s of samples) {
      const verdict = s.judge as Record<string, unknown>;
      expect(verdict).toMatchObject({ judge_mode: "llm_judge", mode: "score", model: "fixed-judge" });
      expect(verdict.reply).toBe(
        `{"score": ${verdict.score}, "reason": "length ${String(verdict.reply).match(/length (\d+)/)![1]}"}`,
      );
      expect([0.25, 0.75]).toContain(verdict.score);
      // The reward is the judge's score, unless the length limit cut the answer (then 0).
      expect([0, verdict.score]).toContain(s.reward);
    }
    expect(samples.filter((s) => s.reward === (s.judge as { score: number }).score).length).toBeGreaterThan(0);

    const metrics = await readJsonl(join(out, "metrics.jsonl"));
    expect(metrics.map((m) => m.step)).toEqual([1, 2]);
    for (const m of metrics) {
      expect(m["rollout/reward_mean"]).toBeGreaterThanOrEqual(0);
      expect(m["rollout/reward_mean"]).toBeLessThanOrEqual(0.75);
    }
    expect(await folderText(out)).not.toContain(KEY);
  });

  it("ranks each group in one judge request in group_rank mode", async () => {
    // The judge ranks the answers in reverse order of their number: the last is best.
    const judge = await startJudge((request) => {
      const n = Number(request.prompt.match(/\((\d+) answers\)/)![1]);
      return { reply: `{"ranking": [${Array.from({ length: n }, (_, i) => n - i).join(", ")}]}` };
    });
    const { recipe, out } = await runDir(
      judgeRecipe(`
        base_url: ${judge.baseUrl}
        model: ranker
        mode: group_rank
        rubric: "Task {{prompt}} ({{n}} answers) {{responses}}"
        cache: false
      `),
    );
    await runRecipe(recipe, { outputDir: out });
    // One request per group: 2 steps × 2 tasks, each showing its 4 answers.
    expect(judge.requests).toHaveLength(4);
    for (const r of judge.requests)
      expect(r.prompt.match(/Answer \d:/g)).toEqual(["Answer 1:", "Answer 2:", "Answer 3:", "Answer 4:"]);
    const samples = await readJsonl(join(out, "samples.jsonl"));
    expect(samples.length).toBeGreaterThan(0);
    for (const s of samples) {
      const verdict = s.judge as { rank: number; score: number; mode: string };
      expect(verdict.mode).toBe("group_rank");
      // run r (0-based) is answer r + 1, ranked 4 − r.
      expect(verdict.rank).toBe(4 - (s.run as number));
      expect(verdict.score).toBeCloseTo((s.run as number) / 3, 10);
      expect([0, verdict.score]).toContain(s.reward);
    }
  });

  it("fails a rollout whose judge answers garbage (nexrl serve's untrained model), showing its words, after the retries", async () => {
    const server = await startServer({
      protocol: "openai",
      outputDir: await tempDir(),
      apiKey: KEY,
      log: () => undefined,
    });
    try {
      process.env[KEY_ENV] = KEY;
      const { recipe, out } = await runDir(
        judgeRecipe(`
          base_url: ${server.url}/v1
          model: tiny
          api_key_env: ${KEY_ENV}
          rubric: "Score:{{response}}"
          max_tokens: 16
          max_retries: 1
        `),
      );
      await expect(runRecipe(recipe, { outputDir: out })).rejects.toThrow(RolloutError);
      // Rollouts judged at the same time may fail together before the run stops: each one is recorded.
      const failures = await readJsonl(join(out, "failures.jsonl"));
      expect(failures.length).toBeGreaterThan(0);
      for (const failure of failures) {
        expect(failure).toMatchObject({ kind: "error", error: "JudgeError", attempt: 1, action: "stop" });
        expect(failure.message).toMatch(
          new RegExp(
            `^the judge \\(tiny at ${server.url}/v1\\) gave no usable verdict in 2 attempts: no score in the reply .*; its last reply: ".+"$`,
            "s",
          ),
        );
      }
      expect(await folderText(out)).not.toContain(KEY);
    } finally {
      await server.close();
    }
  });

  it("fails a rollout whose judge never answers, after the retries, as timed out", async () => {
    const judge = await startJudge(() => ({ hang: true }));
    const { recipe, out } = await runDir(
      judgeRecipe(`
        base_url: ${judge.baseUrl}
        model: silent
        timeout_seconds: 0.2
        max_retries: 2
      `),
    );
    await expect(runRecipe(recipe, { outputDir: out })).rejects.toThrow(RolloutError);
    const failures = await readJsonl(join(out, "failures.jsonl"));
    expect(failures.length).toBeGreaterThan(0);
    for (const failure of failures) {
      expect(failure).toMatchObject({ error: "JudgeError", action: "stop" });
      expect(failure.message).toContain("gave no usable verdict in 3 attempts: a request timed out after 0.2 s");
    }
    expect(judge.requests.length).toBeGreaterThanOrEqual(3);
  });

  it("refuses to start without the key variable it names", async () => {
    const judge = await startJudge(() => ({ reply: '{"score": 1}' }));
    const { recipe, out } = await runDir(
      judgeRecipe(`
        base_url: ${judge.baseUrl}
        model: fixed-judge
        api_key_env: ${KEY_ENV}
      `),
    );
    await expect(runRecipe(recipe, { outputDir: out })).rejects.toThrow(
      `rollout_worker.judge.api_key_env names ${KEY_ENV}, which is not set`,
    );
    expect(judge.requests).toEqual([]);
  });
});
