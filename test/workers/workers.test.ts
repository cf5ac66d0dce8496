import { describe, expect, expectTypeOf, it } from "vitest";
import type { BaseTrainer } from "../../src/algorithms/base-trainer.js";
import { answersMatch, extractFinalAnswer } from "../../src/workers/math-answer.js";
import { BaseRolloutWorker } from "../../src/contracts/rollout-worker.js";
import { PigLatinRolloutWorker, wordAccuracy } from "../../src/workers/pig-latin.js";
import { RolloutRunner } from "../../src/rollouts/runner.js";
import { SingleTurnMathRolloutWorker } from "../../src/workers/single-turn-math.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import type { Trainer } from "../../src/contracts/trainer.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { SamplerInferenceClient } from "../../src/inference/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { task, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { workerSettings } from "../../src/recipe/settings.js";

async function runnerFor(
  workerClass: typeof PigLatinRolloutWorker | typeof SingleTurnMathRolloutWorker,
  maxSequenceLength = 120,
) {
  const dir = await tempDir();
  await writeJsonl(`${dir}/train.jsonl`, [{ input: "x", output: "y" }]);
  const recipe = await writeRecipe(
    dir,
    `data: {data_files: [train.jsonl], prompt_key: input, max_prompt_length: 12}\nrollout_worker: {type: pig_latin, max_sequence_length: ${maxSequenceLength}, max_response_length: 8, temperature: 1}\ntrainer: {type: remote_api_cross_entropy, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n`,
  );
  const tokenizer = new ByteTokenizer();
  const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
  const inference = new SamplerInferenceClient({
    tokenizer,
    samplingClient: await service.createSamplingClient("tiny"),
  });
  return new RolloutRunner({
    createWorker: (slot) => new workerClass({ name: `w-${slot}`, settings: workerSettings(recipe.config), tokenizer }),
    numWorkers: 1,
    timeoutMs: 0,
    policy: { mode: "fail_fast" },
    inference,
    sampling: { temperature: 1, maxTokens: 8 },
    maxSequenceLength,
    currentVersion: () => 0,
  });
}

describe("built-in rollout workers", () => {
  it("pig_latin builds an SFT trajectory from the labels: prompt masked, answer and EOS trained, reward 1", async () => {
    const tokenizer = new ByteTokenizer();
    const runner = await runnerFor(PigLatinRolloutWorker);
    const t = task({ data: { input: "hello world", output: "ello-hay orld-way" }, prompt: "hello world" });
    const [trajectory] = (await runner.run(t)).trajectories;
    const prompt = tokenizer.encode("English: hello world\nPig Latin:", { addBos: true });
    const answer = [...tokenizer.encode(" ello-hay orld-way"), tokenizer.eosId];
    expect(trajectory!.tokens).toEqual([...prompt, ...answer]);
    expect(trajectory!.lossMask).toEqual([...prompt.map(() => 0), ...answer.map(() => 1)]);
    expect(trajectory!.reward).toBe(1);
    expect(trajectory!.logprobs).toBeUndefined();
    await expect(runner.run(task({ data: { input: "hello" }, prompt: "hello" }))).rejects.toThrow(
      /row 1 has no text field "output"/,
    );
    const short = await runnerFor(PigLatinRolloutWorker, 20);
    await expect(short.run(t)).rejects.toThrow(/needs 51 tokens, more than rollout_worker.max_sequence_length \(20\)/);
  });

  it("pig_latin validation samples greedily and scores the words translated right", async () => {
    expect([
      wordAccuracy(" ello-hay orld-way", "ello-hay orld-way"),
      wordAccuracy("ello-hay x", "ello-hay orld-way"),
      wordAccuracy("", "a-way"),
    ]).toEqual([1, 0.5, 0]);
    const runner = await runnerFor(PigLatinRolloutWorker);
    const [trajectory] = (await runner.run(task({ data: { input: "hi", output: "ih-ay" }, prompt: "hi", isVal: true })))
      .trajectories;
    expect(trajectory!.reward).toBe(0);
    expect(trajectory!.logprobs).toHaveLength(trajectory!.tokens.length);
    expect(trajectory!.extraFields).toMatchObject({ answer: "ih-ay", finish_reason: expect.any(String) });
  });

  it("single_turn_math samples through the chat template and rewards the extracted answer", async () => {
    const runner = await runnerFor(SingleTurnMathRolloutWorker);
    const t: RolloutTask = task({
      data: { prompt: "What is 2 + 2?", reward_model: { ground_truth: "4" }, data_source: "add" },
    });
    const [trajectory] = (await runner.run(t)).trajectories;
    const prompt = new ByteTokenizer().applyChatTemplate([{ role: "user", content: "What is 2 + 2?" }], {
      addGenerationPrompt: true,
    });
    expect(trajectory!.tokens.slice(0, prompt.length)).toEqual(prompt);
    expect(trajectory!.lossMask.slice(prompt.length).every((m) => m === 1)).toBe(true);
    expect(trajectory!.logprobs!.slice(0, prompt.length).every((lp) => lp === 0)).toBe(true);
    expect(trajectory!.extraFields).toMatchObject({ ground_truth: "4", data_source: "add" });
    const extracted = (trajectory!.extraFields.extracted_answer as string | null) ?? undefined;
    expect(trajectory!.reward).toBe(
      answersMatch(extracted, "4") && trajectory!.extraFields.finish_reason !== "length" ? 1 : 0,
    );
    await expect(runner.run(task({ data: { prompt: "What?" } }))).rejects.toThrow(/row 1 has no ground truth/);
  });
});

describe("math answers", () => {
  it("extracts \\boxed{}, <answer>, #### and else the last number", () => {
    expect(extractFinalAnswer("so \\boxed{\\frac{1}{2}} and \\boxed{12}")).toBe("12");
    expect(extractFinalAnswer("x \\boxed{\\frac{1}{2}}")).toBe("\\frac{1}{2}");
    expect(extractFinalAnswer("<answer> 7 </answer> then <answer>8</answer>")).toBe("8");
    expect(extractFinalAnswer("work... #### 1,234")).toBe("1,234");
    expect(extractFinalAnswer("3 + 4 = 7")).toBe("7");
    expect(extractFinalAnswer("-5")).toBe("-5");
    expect(extractFinalAnswer("no digits")).toBeUndefined();
  });

  it("compares numerically when both sides are numbers, else as normalised text", () => {
    expect(answersMatch("1,234", "1234")).toBe(true);
    expect(answersMatch("12.0", "12")).toBe(true);
    expect(answersMatch("$7$.", "7")).toBe(true);
    expect(answersMatch("13", "12")).toBe(false);
    expect(answersMatch("\\frac{1}{2}", "\\frac{1}{ 2}")).toBe(true);
    expect(answersMatch("Paris", "paris")).toBe(true);
    expect(answersMatch(undefined, "1")).toBe(false);
  });
});

describe("the worker and trainer contracts", () => {
  it("types task.data by the worker's Row, and BaseTrainer is a Trainer", () => {
    interface QaRow {
      question: string;
      answer: number;
    }
    class QaWorker extends BaseRolloutWorker<QaRow> {
      rollout(t: RolloutTask<QaRow>) {
        expectTypeOf(t.data.answer).toEqualTypeOf<number>();
        // @ts-expect-error -- a field the row type does not declare
        void t.data.missing;
        return undefined;
      }
    }
    expectTypeOf<QaWorker>().toMatchTypeOf<BaseRolloutWorker>();
    expectTypeOf<BaseTrainer>().toMatchTypeOf<Trainer>();
    expectTypeOf<RolloutTask["data"]>().toEqualTypeOf<Readonly<Record<string, unknown>>>();
    expect(Object.getPrototypeOf(QaWorker)).toBe(BaseRolloutWorker);
  });
});
