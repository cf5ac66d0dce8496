/**
 * Reward models: the `remote_api_reward_model` trainer learns to rank held-out preference pairs,
 * and a GRPO run with `judge_mode: reward_model` takes its rewards from that model's sampler,
 * equal to the score computed directly.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import {
  REWARD_MODEL_JUDGEMENT,
  REWARD_MODEL_QUESTION,
  RewardModelScorer,
  rewardModelSequence,
} from "../../src/rewards/reward-model.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { RewardModelTrainer } from "../../src/algorithms/reward-model.js";
import type { TrainerContext } from "../../src/contracts/trainer.js";
import { trainerSettings, workerSettings } from "../../src/recipe/settings.js";
import type { RecipeConfig } from "../../src/recipe/schema/recipe.js";
import { PreferenceRolloutWorker } from "../../src/workers/preference.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { Trajectory } from "../../src/contracts/trajectory.js";
import { recipeError } from "../support/recipe.js";
import { task, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const tokenizer = new ByteTokenizer();
const RECIPE = fileURLToPath(new URL("../../recipe/preference/", import.meta.url));

type Row = { prompt: string; chosen: string; rejected: string };

async function rowsOf(name: string): Promise<Row[]> {
  const text = await readFile(join(RECIPE, "data", name), "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Row);
}

/** The `preference` worker's pairs of `rows`, one rollout per row. */
async function pairsOf(rows: readonly Row[], config: RecipeConfig): Promise<Trajectory[]> {
  const worker = new PreferenceRolloutWorker({ name: "w", settings: workerSettings(config), tokenizer });
  const out: Trajectory[] = [];
  for (const [i, row] of rows.entries()) {
    for (const t of await worker.rollout(task({ data: row, index: i }))) {
      Object.assign(t, { groupId: `g${i}`, runId: 0 });
      out.push(t);
    }
  }
  return out;
}

/** A chat-formatted prompt and an answer with EOS, as the policy would have written it. */
const answerTokens = (prompt: string, answer: string): number[] => [
  ...tokenizer.applyChatTemplate([{ role: "user", content: prompt }], { addGenerationPrompt: true }),
  ...tokenizer.encode(answer),
  tokenizer.eosId,
];

describe("the reward model's sequence", () => {
  it("appends the question and the judgement, scoring the judgement's tokens", () => {
    const seq = rewardModelSequence(tokenizer, [1, 2, 3]);
    const question = tokenizer.encode(REWARD_MODEL_QUESTION);
    const judgement = tokenizer.encode(REWARD_MODEL_JUDGEMENT);
    expect(seq.tokens).toEqual([1, 2, 3, ...question, ...judgement]);
    expect(seq.scored).toEqual([0, 0, 0, ...question.map(() => 0), ...judgement.map(() => 1)]);
  });
});

describe("remote_api_reward_model and judge_mode: reward_model on the local engine", () => {
  it("ranks held-out pairs better than chance after training, and a GRPO run's rewards are its scores", async () => {
    const dir = await tempDir();
    const { config } = await loadRecipe(join(RECIPE, "local_reward_model.yaml"), {
      env: {},
      overrides: ["service.train_service.config.learning_rate=3e-3"],
    });
    const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const ctx: TrainerContext = {
      settings: trainerSettings(config),
      service,
      trainingClient: client,
      tokenizer,
      initialSamplerPath: (await (await client.saveWeightsForSampler("initial")).result()).path,
      warn: () => undefined,
    };
    const trainer = new RewardModelTrainer(ctx);
    // The lower-case half of the data: the rule "no capitals" without reading the instruction.
    const lower = (rows: Row[]) => rows.filter((r) => r.prompt.startsWith("lowercase"));
    const train = lower(await rowsOf("train.jsonl"));
    const heldOut = lower(await rowsOf("val.jsonl"));
    const accuracy = async (scorer: RewardModelScorer): Promise<number> => {
      let right = 0;
      for (const row of heldOut) {
        const [c, r] = [
          await scorer.score(answerTokens(row.prompt, row.chosen)),
          await scorer.score(answerTokens(row.prompt, row.rejected)),
        ];
        right += c > r ? 1 : 0;
      }
      return right / heldOut.length;
    };
    const history: Array<Record<string, number>> = [];
    for (let step = 0; step < 10; step++) {
      const metrics: Record<string, number> = {};
      await trainer.train(await pairsOf(train.slice(step * 8, step * 8 + 8), config), metrics);
      history.push(metrics);
    }
    expect(history[0]!["rm/num_pairs"]).toBe(8);
    expect(history.at(-1)!["rm/margin"]).toBeGreaterThan(history[0]!["rm/margin"]! + 0.1);
    const samplerPath = await trainer.saveSamplerWeights("rm");
    const scorer = new RewardModelScorer(service.createSamplingClient(samplerPath), tokenizer);
    const heldOutAccuracy = await accuracy(scorer);
    expect(heldOut.length).toBeGreaterThanOrEqual(15);
    expect(heldOutAccuracy).toBeGreaterThanOrEqual(0.8);

    // GRPO against the reward model: each rollout's reward is the model's score of its tokens.
    const out = join(dir, "grpo");
    const result = await runRecipe(join(RECIPE, "local_reward_model.yaml"), {
      outputDir: out,
      env: {},
      overrides: [
        "trainer.type=remote_api_grpo",
        "trainer.total_train_steps=2",
        "rollout_worker.type=single_turn_math",
        "rollout_worker.temperature=1.0",
        "rollout_worker.max_response_length=12",
        "rollout_worker.agent={math: {judge_mode: reward_model}}",
        `rollout_worker.reward_model.sampler_path=${samplerPath}`,
        "data.batch_size=2",
        "data.rollout_repeat_n=4",
        "trajectory_pool.batch_size=8",
      ],
    });
    expect(result).toMatchObject({ steps: 2, stopReason: "completed" });
    const samples = (await readFile(join(out, "samples.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(samples.length).toBeGreaterThan(0);
    const prompts = new Map(
      (await rowsOf("train.jsonl")).map((row) => {
        const tokens = tokenizer.applyChatTemplate([{ role: "user", content: row.prompt }], {
          addGenerationPrompt: true,
        });
        return [tokenizer.decode(tokens), tokens] as const;
      }),
    );
    const rewards = new Set<number>();
    for (const sample of samples) {
      const promptTokens = prompts.get(sample.prompt as string);
      expect(promptTokens, sample.prompt as string).toBeDefined();
      const ids = (sample.response_tokens as { ids: number[] }).ids;
      const direct = await scorer.score([...promptTokens!, ...ids]);
      expect(sample.reward).toBeCloseTo(direct, 5);
      expect(sample.extra_fields).toMatchObject({ reward_model: { score: sample.reward } });
      expect(direct).toBeLessThan(0);
      rewards.add(Math.round(direct * 1e4));
    }
    expect(rewards.size).toBeGreaterThan(1); // scores, not a constant
    for (const row of result.metrics) expect(Number.isFinite(row["rollout/reward_mean"])).toBe(true);
  });

  it("refuses judge_mode reward_model without a reward model, and a reward model in another mode", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), [{ prompt: "p" }]);
    const base = (worker: string) =>
      `data: {data_files: [train.jsonl], max_prompt_length: 16, rollout_repeat_n: 2}\nrollout_worker: {type: single_turn_math, max_response_length: 16${worker}}\ntrainer: {type: remote_api_grpo, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n`;
    const issues = async (yaml: string) =>
      (await recipeError(writeRecipe(dir, yaml))).issues.map((i) => `${i.keyPath}: ${i.message}`);
    expect(await issues(base(", agent: {math: {judge_mode: reward_model}}"))).toEqual([
      expect.stringMatching(/^rollout_worker\.reward_model: required when `agent\.math\.judge_mode` is `reward_model`/),
    ]);
    expect(await issues(base(", reward_model: {sampler_path: x}"))).toEqual([
      expect.stringMatching(
        /^rollout_worker\.reward_model: read only when `agent\.math\.judge_mode` is `reward_model`/,
      ),
    ]);
    expect(
      await issues(base(", agent: {math: {judge_mode: reward_model}}, reward_model: {sampler_path: x, scale: 2}")),
    ).toEqual([expect.stringMatching(/^rollout_worker\.reward_model\.scale: unknown key/)]);
    const ok = await writeRecipe(
      dir,
      base(", agent: {math: {judge_mode: reward_model}}, reward_model: {sampler_path: x}"),
    );
    expect(ok.config.rollout_worker.reward_model).toEqual({ sampler_path: "x" });
  });
});
