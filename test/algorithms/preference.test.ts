/**
 * Preference learning: the pairwise loss's figures on a hand-checked case, the `preference`
 * worker's pairs, the `remote_api_dpo` trainer on the real engine (its reference, its learning),
 * a whole DPO run of recipe/preference, and the recipe keys it adds.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { DpoTrainer } from "../../src/algorithms/dpo.js";
import { pairwiseLogisticLoss } from "../../src/algorithms/pairwise-loss.js";
import { preferencePairs } from "../../src/algorithms/preference.js";
import type { TrainerContext } from "../../src/contracts/trainer.js";
import { trainerSettings, workerSettings } from "../../src/recipe/settings.js";
import type { RecipeConfig } from "../../src/recipe/schema/recipe.js";
import { PreferenceRolloutWorker } from "../../src/workers/preference.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { SamplerInferenceClient } from "../../src/inference/sampler-inference.js";
import { runRollout } from "../../src/testing/index.js";
import { Trajectory, type PreferenceSide } from "../../src/contracts/trajectory.js";
import { datum } from "../../src/wire/wire.js";
import { recipeError } from "../support/recipe.js";
import { service } from "../support/training.js";
import { task, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const tokenizer = new ByteTokenizer();
const RECIPE = fileURLToPath(new URL("../../recipe/preference/", import.meta.url));

/** Rows of the recipe's data file. */
async function preferenceRows(name: string): Promise<Array<{ prompt: string; chosen: string; rejected: string }>> {
  const text = await readFile(join(RECIPE, "data", name), "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { prompt: string; chosen: string; rejected: string });
}

/** The pairs of `rows` as the `preference` worker makes them, one rollout (group) per row. */
async function pairsOf(rows: ReadonlyArray<Record<string, unknown>>, config: RecipeConfig) {
  const worker = new PreferenceRolloutWorker({ name: "w", settings: workerSettings(config), tokenizer });
  const out: Trajectory[] = [];
  for (const [i, row] of rows.entries()) {
    for (const t of await worker.rollout(task({ data: row, index: i, groupId: `g${i}` }))) {
      t.groupId = `g${i}`;
      t.runId = 0;
      out.push(t);
    }
  }
  return out;
}

/** A DPO trainer context on a fresh tiny local model, for the recipe's config with `overrides`. */
async function dpoContext(overrides: string[] = []) {
  const dir = await tempDir();
  const { config } = await loadRecipe(join(RECIPE, "local.yaml"), { env: {}, overrides });
  const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
  const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
  const initialSamplerPath = (await (await client.saveWeightsForSampler("initial")).result()).path;
  const ctx: TrainerContext = {
    settings: trainerSettings(config),
    service,
    trainingClient: client,
    tokenizer,
    initialSamplerPath,
    warn: () => undefined,
  };
  return { ctx, config, service, client, dir };
}

describe("the pairwise logistic loss", () => {
  it("gives the hand-computed loss, margin, accuracy, rewards and gradients", () => {
    // Pair 0: S_c = (−1 − 2) − (−1.5 − 2.5) = 1, S_r = −3 − (−2) = −1, m = 0.5·2 = 1.
    // Pair 1: S_c = 0, S_r = −1.6 − (−2) = 0.4, m = 0.5·(−0.4) = −0.2.
    const data = [
      datum([1, 2], { target_tokens: [2, 3], weights: [1, 1], ref_logprobs: [-1.5, -2.5] }),
      datum([1, 2], { target_tokens: [2, 4], weights: [0, 1], ref_logprobs: [-9, -2] }),
      datum([5], { target_tokens: [6], weights: [1], ref_logprobs: [-0.7] }),
      datum([5], { target_tokens: [7], weights: [1], ref_logprobs: [-2] }),
    ];
    const logprobs = [[-1, -2], [-8, -3], [-0.7], [-1.6]];
    const out = pairwiseLogisticLoss({ beta: 0.5, metricPrefix: "dpo" })(data, logprobs);
    if (out instanceof Promise) throw new Error("the loss is synchronous");
    const softplus = (x: number): number => Math.log1p(Math.exp(x));
    expect(out.loss).toBeCloseTo((softplus(-1) + softplus(0.2)) / 2, 12);
    expect(out.metrics).toEqual({
      "dpo/loss": out.loss,
      "dpo/margin": expect.closeTo(0.4, 12),
      "dpo/accuracy": 0.5,
      "dpo/chosen_reward": expect.closeTo(0.25, 12),
      "dpo/rejected_reward": expect.closeTo(-0.15, 12),
      "dpo/num_pairs": 2,
    });
    // ∂loss/∂lp = ∓β·σ(−m)/K on the weighted tokens of the chosen / rejected answer.
    const g0 = (0.5 * (1 / (1 + Math.exp(1)))) / 2;
    const g1 = (0.5 * (1 / (1 + Math.exp(-0.2)))) / 2;
    const expected = [[-g0, -g0], [0, g0], [-g1], [g1]];
    out.gradLogprobs.forEach((g, i) => Array.from(g).forEach((x, t) => expect(x).toBeCloseTo(expected[i]![t]!, 12)));
  });

  it("counts ties (float noise around 0) as half right, reads no reference when there is none, and refuses an odd batch", () => {
    const loss = pairwiseLogisticLoss({ beta: 1, metricPrefix: "rm" });
    const pair = [datum([1], { target_tokens: [2], weights: [1] }), datum([1], { target_tokens: [3], weights: [1] })];
    const tie = loss(pair, [[-2], [-2 + 1e-8]]) as { metrics: Record<string, number> };
    expect(tie.metrics["rm/accuracy"]).toBe(0.5);
    const won = loss(pair, [[-1], [-3]]) as { loss: number; metrics: Record<string, number> };
    expect(won.metrics).toMatchObject({ "rm/accuracy": 1, "rm/margin": 2, "rm/chosen_reward": -1 });
    expect(won.loss).toBeCloseTo(Math.log1p(Math.exp(-2)), 12);
    expect(() => loss(pair.slice(1), [[-1]])).toThrow(/1 datums; they must come in pairs/);
  });
});

describe("the preference worker and pairs", () => {
  it("makes a chosen and a rejected trajectory of a row, the prompt through the chat template", async () => {
    const { config } = await loadRecipe(join(RECIPE, "local.yaml"), { env: {} });
    const row = { prompt: "lowercase: Red cAt", chosen: "red cat", rejected: "RED CAT" };
    const [chosen, rejected] = await pairsOf([row], config);
    const prompt = tokenizer.applyChatTemplate([{ role: "user", content: row.prompt }], { addGenerationPrompt: true });
    expect(chosen!.tokens).toEqual([...prompt, ...tokenizer.encode("red cat"), tokenizer.eosId]);
    expect(chosen!.lossMask).toEqual([...prompt.map(() => 0), ...Array<number>(8).fill(1)]);
    expect(rejected!.tokens.slice(prompt.length)).toEqual([...tokenizer.encode("RED CAT"), tokenizer.eosId]);
    expect([chosen!.preference, rejected!.preference]).toEqual(["chosen", "rejected"]);
    expect([chosen!.reward, rejected!.reward]).toEqual([1, 0]);
    // Chat messages work as prompts too.
    const [fromMessages] = await pairsOf([{ ...row, prompt: [{ role: "user", content: row.prompt }] }], config);
    expect(fromMessages!.tokens).toEqual(chosen!.tokens);
    const worker = new PreferenceRolloutWorker({ name: "w", settings: workerSettings(config), tokenizer });
    await expect(worker.rollout(task({ data: { prompt: "x", chosen: "a" } }))).rejects.toThrow(
      /row 1 needs text fields "chosen" and "rejected"/,
    );
  });

  it("validates by answering greedily: reward 1 when the answer is the row's chosen one", async () => {
    const { config } = await loadRecipe(join(RECIPE, "local.yaml"), { env: {} });
    const service = new LocalTrainingService({ outputDir: await tempDir(), seed: 0 });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
    const path = (await (await client.saveWeightsForSampler("v")).result()).path;
    const inferenceClient = new SamplerInferenceClient({
      tokenizer,
      samplingClient: await service.createSamplingClient(path),
      defaultMaxTokens: 8,
    });
    const worker = new PreferenceRolloutWorker({ name: "v", settings: workerSettings(config), tokenizer });
    const prompt = "lowercase: Red cAt";
    // runRollout samples at most the recipe's max_response_length, as a run does.
    const maxTokens = workerSettings(config).maxResponseLength;
    const greedy = (await inferenceClient.chat([{ role: "user", content: prompt }], { temperature: 0, maxTokens }))
      .response;
    const validate = async (chosen: string, rejected: string) => {
      const [t] = await runRollout(worker, task({ data: { prompt, chosen, rejected }, isVal: true }), {
        inferenceClient,
      });
      return t!;
    };
    const right = await validate(` ${greedy} `, "other");
    expect(right.reward).toBe(1);
    expect(right.extraFields).toMatchObject({ chosen: ` ${greedy} `, matches_rejected: false, response: greedy });
    expect(right.lossMask.filter((m) => m === 1).length).toBeGreaterThan(0);
    const wrong = await validate("red cat", greedy);
    expect(wrong.reward).toBe(greedy.trim() === "red cat" ? 1 : 0);
    expect(wrong.extraFields.matches_rejected).toBe(true);
  });

  it("orders trajectories as [chosen, rejected] pairs by rollout, and refuses what is not a pair", async () => {
    const t = (side: PreferenceSide | undefined, groupId: string): Trajectory =>
      new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 0, groupId, runId: 0, preference: side });
    const [r1, c1, c2, r2] = [t("rejected", "a"), t("chosen", "a"), t("chosen", "b"), t("rejected", "b")];
    expect(preferencePairs([r1!, c1!, c2!, r2!])).toEqual([c1, r1, c2, r2]);
    expect(() => preferencePairs([c1!])).toThrow(/rollout a\/0 returned only a "chosen" trajectory/);
    expect(() => preferencePairs([c1!, t("chosen", "a")])).toThrow(/two "chosen" trajectories/);
    expect(() => preferencePairs([t(undefined, "a")])).toThrow(
      'a preference trainer got a trajectory of group a with preference unset; each rollout must return two trajectories marked "chosen" and "rejected"',
    );
  });
});

describe("remote_api_dpo on the local engine", () => {
  it("starts at margin 0 against its frozen initial weights, then raises margin and accuracy on the recipe's pairs", async () => {
    const { ctx, config } = await dpoContext(["service.train_service.config.learning_rate=3e-3"]);
    const trainer = new DpoTrainer(ctx);
    const rows = (await preferenceRows("train.jsonl")).slice(0, 8);
    const history: Array<Record<string, number>> = [];
    for (let step = 0; step < 12; step++) {
      const metrics: Record<string, number> = {};
      const result = await trainer.train(await pairsOf(rows, config), metrics);
      expect(result).toMatchObject({ stepped: true, datums: 16 });
      history.push(metrics);
    }
    const first = history[0]!;
    // The policy is its reference at the first step: every margin is float noise.
    expect(Math.abs(first["dpo/margin"]!)).toBeLessThan(1e-5);
    expect(first["dpo/accuracy"]).toBe(0.5);
    expect(first["dpo/loss"]).toBeCloseTo(Math.log(2), 5);
    expect(first["train/loss"]).toBe(first["dpo/loss"]);
    expect(first["dpo/num_pairs"]).toBe(8);
    const last = history.at(-1)!;
    expect(last["dpo/accuracy"]).toBeGreaterThanOrEqual(0.875);
    expect(last["dpo/margin"]).toBeGreaterThan(0.2);
    expect(last["dpo/loss"]).toBeLessThan(Math.log(2) - 0.1);
    expect(last["dpo/chosen_reward"]! - last["dpo/rejected_reward"]!).toBeCloseTo(last["dpo/margin"]!, 10);
  });

  it("records the step's size and optimizer figures as every trainer does, and skips a batch without pairs", async () => {
    const { ctx, config } = await dpoContext();
    const trainer = new DpoTrainer(ctx);
    const pairs = await pairsOf((await preferenceRows("train.jsonl")).slice(0, 3), config);
    const metrics: Record<string, number> = {};
    expect(await trainer.train(pairs, metrics)).toMatchObject({ stepped: true, datums: 6 });
    const scored = pairs.reduce((n, t) => n + t.lossMask.reduce((a, m) => a + m, 0), 0);
    expect(scored).toBeGreaterThan(6);
    expect(metrics).toMatchObject({ "train/num_datums": 6, "train/num_tokens": scored, "train/skipped": 0 });
    // The engine's gradient norm, moved to optim/*: a real update happened.
    expect(metrics["optim/grad_norm:mean"]).toBeGreaterThan(0);
    const empty: Record<string, number> = {};
    expect(await trainer.train([], empty)).toEqual({
      trajectories: [],
      datums: 0,
      stepped: false,
      skipReason: "the step had no preference pairs",
    });
    expect(empty).toMatchObject({ "train/num_datums": 0, "train/num_tokens": 0, "train/skipped": 1 });
    expect(Object.keys(empty).some((k) => k.startsWith("optim/"))).toBe(false);
  });

  it("measures against the sampler of trainer.dpo.reference when set, scaled by trainer.dpo.beta", async () => {
    const { ctx, config, service } = await dpoContext();
    // Another model's weights as the reference: margins are not 0 from the start.
    const other = await service.createTrainingClient({ baseModel: "tiny", seed: 99 });
    const reference = (await (await other.saveWeightsForSampler("other")).result()).path;
    const pairs = await pairsOf((await preferenceRows("train.jsonl")).slice(0, 4), config);
    const margins: number[] = [];
    for (const beta of [0.1, 0.3]) {
      const settings = { ...ctx.settings, dpo: { beta, reference } };
      const metrics: Record<string, number> = {};
      // A fresh policy with the same weights each time: a step's figures come before its update.
      const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
      await new DpoTrainer({ ...ctx, settings, trainingClient: client }).train(pairs, metrics);
      margins.push(metrics["dpo/margin"]!);
    }
    expect(Math.abs(margins[0]!)).toBeGreaterThan(1e-3);
    expect(margins[1]! / margins[0]!).toBeCloseTo(3, 4);
  });

  it("gives the same first two steps through the Tinker and Weaver protocols (nexrl serve) as on the local engine", async () => {
    const { config } = await loadRecipe(join(RECIPE, "local.yaml"), { env: {} });
    const pairs = async () => pairsOf((await preferenceRows("train.jsonl")).slice(0, 4), config);
    const figures: Record<string, number[]> = {};
    for (const backend of ["local", "tinker", "weaver"] as const) {
      const svc = await service(backend);
      // LoRA of rank 32 everywhere: what nexrl serve's Tinker models (and Weaver's default) train.
      const client = await svc.createTrainingClient({ baseModel: "tiny", seed: 1, loraRank: 32 });
      const initialSamplerPath = (await (await client.saveWeightsForSampler("initial")).result()).path;
      const trainer = new DpoTrainer({
        settings: trainerSettings(config),
        service: svc,
        trainingClient: client,
        tokenizer,
        initialSamplerPath,
        warn: () => undefined,
      });
      figures[backend] = [];
      for (let step = 0; step < 2; step++) {
        const metrics: Record<string, number> = {};
        await trainer.train(await pairs(), metrics);
        figures[backend].push(metrics["dpo/margin"]!, metrics["dpo/loss"]!);
      }
    }
    expect(Math.abs(figures.local![2]!)).toBeGreaterThan(1e-4); // the first step moved the policy
    for (const backend of ["tinker", "weaver"])
      figures[backend]!.forEach((x, i) => expect(x, `${backend} figure ${i}`).toBeCloseTo(figures.local![i]!, 5));
  });

  it("runs recipe/preference/local.yaml: dpo/* metrics every step, accuracy 0.5 at the first and the loss below log 2 at the last", async () => {
    const dir = await tempDir();
    const result = await runRecipe(join(RECIPE, "local.yaml"), {
      outputDir: join(dir, "out"),
      overrides: ["trainer.total_train_steps=6", "data.batch_size=4", "trajectory_pool.batch_size=8"],
      env: {},
    });
    expect(result).toMatchObject({ steps: 6, stopReason: "completed" });
    for (const row of result.metrics) {
      for (const key of ["dpo/margin", "dpo/accuracy", "dpo/chosen_reward", "dpo/rejected_reward", "dpo/loss"])
        expect(Number.isFinite(row[key]), key).toBe(true);
      expect(row["dpo/num_pairs"]).toBe(4);
      expect(row["rollout/num_trajectories"]).toBe(8);
    }
    expect(result.metrics[0]!["dpo/accuracy"]).toBe(0.5);
    expect(result.metrics.at(-1)!["dpo/loss"]).toBeLessThan(Math.log(2));
    // The run's summary follows the pair accuracy first → last.
    expect(result.summary.trends.find((t) => t.key === "dpo/accuracy")).toMatchObject({
      first: { step: 1, value: 0.5 },
      last: { step: 6, value: result.metrics.at(-1)!["dpo/accuracy"] },
    });
  });
});

describe("recipe keys of the preference trainers", () => {
  const base = (trainer: string, extra = "") =>
    `data: {data_files: [train.jsonl], max_prompt_length: 16}\nrollout_worker: {type: preference, max_response_length: 16}\ntrainer: {type: ${trainer}, total_train_steps: 1${extra}}\nservice: {train_service: {backend: local, model: tiny}}\n`;
  const issues = async (yaml: string, overrides: string[] = []): Promise<string[]> => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), [{ prompt: "p", chosen: "a", rejected: "b" }]);
    const error = await recipeError(writeRecipe(dir, yaml, overrides));
    return error.issues.map((issue) => `${issue.keyPath}: ${issue.message}`);
  };

  it("reads trainer.dpo with defaults, and cross_entropy as the loss of both preference trainers", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), [{ prompt: "p", chosen: "a", rejected: "b" }]);
    const dpo = await writeRecipe(dir, base("remote_api_dpo", ", dpo: {beta: 0.25}"));
    expect(dpo.config.trainer.dpo).toEqual({ beta: 0.25, reference: null });
    expect(dpo.config.trainer.algorithm.loss_fn).toBe("cross_entropy");
    expect(dpo.config.rollout_worker.need_llm_inference).toBe(false);
    const rm = await writeRecipe(dir, base("remote_api_reward_model"));
    expect(rm.config.trainer.algorithm.loss_fn).toBe("cross_entropy");
  });

  it("refuses trainer.dpo for other trainers, unknown or bad dpo keys, and losses the preference trainers would not use", async () => {
    expect(await issues(base("remote_api_grpo", ", dpo: {beta: 0.1}"), ["++data.rollout_repeat_n=2"])).toEqual([
      "trainer.dpo: read only by `type: remote_api_dpo`, and this trainer is `remote_api_grpo`; remove it",
    ]);
    expect((await issues(base("remote_api_dpo", ", dpo: {beta: 0, betta: 1}"))).sort()).toEqual([
      expect.stringMatching(/^trainer\.dpo\.beta: /),
      expect.stringMatching(/^trainer\.dpo\.betta: unknown key; did you mean `beta`\?/),
    ]);
    for (const [key, value] of [
      ["loss_fn", "importance_sampling"],
      ["loss_fn_config", "{clip_low_threshold: 0.8}"],
    ]) {
      expect(await issues(base("remote_api_dpo"), [`service.train_service.config.${key}=${value}`])).toEqual([
        `service.train_service.config.${key}: remote_api_dpo trains with its own pairwise loss (sent through forwardBackwardCustom as \`cross_entropy\`), so ${key} would not be used; remove it`,
      ]);
    }
    expect(await issues(base("remote_api_reward_model"), ["trainer.algorithm.kl_penalty_coef=0.5"])).toEqual([
      expect.stringMatching(/^trainer\.algorithm\.kl_penalty_coef: read only by remote_api_opd/),
    ]);
  });
});
