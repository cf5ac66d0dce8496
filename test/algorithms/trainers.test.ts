import { describe, expect, it } from "vitest";
import { CrossEntropyTrainer } from "../../src/algorithms/cross-entropy.js";
import { GrpoTrainer } from "../../src/algorithms/grpo.js";
import { OnPolicyDistillationTrainer } from "../../src/algorithms/opd.js";
import { BaseTrainer } from "../../src/algorithms/base-trainer.js";
import type { TrainerContext } from "../../src/contracts/trainer.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import type { TrainingClient } from "../../src/contracts/training.js";
import type { AdamParams } from "../../src/wire/wire.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { InputError } from "../../src/errors.js";
import { trainerSettings } from "../../src/recipe/settings.js";
import { isDerivedFrom } from "../../src/brand.js";

const tokenizer = new ByteTokenizer();

/** A trainer context on a fresh tiny local model; `optimSteps` records every optimStep's parameters. */
async function context(trainer: string, config: string, extra = "") {
  const dir = await tempDir();
  await writeJsonl(`${dir}/train.jsonl`, [{ prompt: "x" }]);
  const recipe = await writeRecipe(
    dir,
    `data: {data_files: [train.jsonl], max_prompt_length: 16, rollout_repeat_n: 2}\nrollout_worker: {type: single_turn_math, max_response_length: 16}\ntrainer: {type: ${trainer}, total_train_steps: 1${extra}}\nservice: {train_service: {backend: local, model: tiny, config: {${config}}}}\n`,
  );
  const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
  const client = await service.createTrainingClient({ baseModel: "tiny", seed: 1 });
  const optimSteps: AdamParams[] = [];
  const recording: TrainingClient = Object.assign(Object.create(client) as TrainingClient, {
    optimStep: (params: AdamParams) => {
      optimSteps.push(params);
      return client.optimStep(params);
    },
  });
  const warnings: string[] = [];
  const initialSamplerPath = (await (await client.saveWeightsForSampler("initial")).result()).path;
  const ctx: TrainerContext = {
    settings: trainerSettings(recipe.config),
    service,
    trainingClient: recording,
    tokenizer,
    initialSamplerPath,
    warn: (m) => warnings.push(m),
  };
  return { ctx, optimSteps, warnings, service, dir };
}

/** A chat-formatted prompt and a response, as trajectories with `reward`; no logprobs. */
function sampled(prompt: string, response: string, reward: number, groupId: string, runId: number): Trajectory {
  const p = tokenizer.applyChatTemplate([{ role: "user", content: prompt }], { addGenerationPrompt: true });
  const r = [...tokenizer.encode(response), tokenizer.eosId];
  return new Trajectory({
    tokens: [...p, ...r],
    lossMask: [...p.map(() => 0), ...r.map(() => 1)],
    reward,
    groupId,
    runId,
  });
}

function sft(input: string, output: string): Trajectory {
  const p = tokenizer.encode(`English: ${input}\nPig Latin:`, { addBos: true });
  const a = [...tokenizer.encode(` ${output}`), tokenizer.eosId];
  return new Trajectory({ tokens: [...p, ...a], lossMask: [...p.map(() => 0), ...a.map(() => 1)], reward: 1 });
}

describe("trainers on the local engine", () => {
  it("cross_entropy lowers the per-token loss and sends every Adam parameter, weight decay and clipping included", async () => {
    const { ctx, optimSteps } = await context(
      "remote_api_cross_entropy",
      "learning_rate: 0.01, weight_decay: 0.05, grad_clip_norm: 0.5, beta2: 0.99",
    );
    const trainer = new CrossEntropyTrainer(ctx);
    const batch = () => [sft("hello", "ello-hay"), sft("apple", "apple-way"), sft("dog", "og-day")];
    const losses: number[] = [];
    let metrics: Record<string, number> = {};
    for (let i = 0; i < 8; i++) {
      metrics = {};
      const result = await trainer.train(batch(), metrics);
      expect(result).toMatchObject({ datums: 3, stepped: true });
      losses.push(metrics["train/loss"]!);
    }
    expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.8);
    expect(losses[0]).toBeCloseTo(Math.log(259), 0);
    const tokens = batch().reduce((n, t) => n + t.numLossTokens, 0);
    expect(metrics).toMatchObject({
      "train/num_datums": 3,
      "train/num_tokens": tokens,
      "train/skipped": 0,
      "rollout/reward_mean": 1,
      "rollout/num_trajectories": 3,
    });
    expect(metrics["train/loss"]).toBeCloseTo(metrics["train/loss_sum"]! / tokens, 9);
    expect(optimSteps[0]).toEqual({
      learningRate: 0.01,
      beta1: 0.9,
      beta2: 0.99,
      eps: 1e-8,
      weightDecay: 0.05,
      gradClipNorm: 0.5,
    });
  });

  it("GRPO computes logprobs with a forward pass when trajectories lack them, warns once, and drops constant groups", async () => {
    const { ctx, warnings, optimSteps } = await context("remote_api_grpo", "learning_rate: 0.001");
    const trainer = new GrpoTrainer(ctx);
    const batch = () => [
      sampled("What is 1 + 1?", "2", 1, "a", 0),
      sampled("What is 1 + 1?", "3", 0, "a", 1),
      sampled("What is 2 + 2?", "5", 0, "b", 0),
      sampled("What is 2 + 2?", "6", 0, "b", 1),
    ];
    const metrics: Record<string, number> = {};
    const result = await trainer.train(batch(), metrics);
    expect(result.trajectories.map((t) => [t.groupId, t.advantage])).toEqual([
      ["a", expect.closeTo(1, 5)],
      ["a", expect.closeTo(-1, 5)],
    ]);
    expect(result.trajectories[0]!.logprobs).toHaveLength(result.trajectories[0]!.tokens.length);
    expect(result.trajectories[0]!.logprobs!.slice(1).every((lp) => lp < 0)).toBe(true);
    expect(metrics).toMatchObject({
      "train/groups": 2,
      "train/groups_constant": 1,
      "train/num_datums": 2,
      "train/skipped": 0,
    });
    expect(metrics["train/kl_sample_train"]).toBeCloseTo(0, 6);
    await trainer.train(batch(), {});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^4 trajectories have no sampler logprobs, which importance_sampling needs; nexrl computes them with a forward pass/,
    );
    expect(optimSteps).toHaveLength(2);
    const skipped: Record<string, number> = {};
    expect(await trainer.train([sampled("q", "x", 1, "c", 0), sampled("q", "y", 1, "c", 1)], skipped)).toMatchObject({
      datums: 0,
      stepped: false,
    });
    expect(skipped).toMatchObject({ "train/skipped": 1, "train/groups_constant": 1 });
    expect(optimSteps).toHaveLength(2);
    const twoGroups = [sampled("q", "x", 1, "c", 0), sampled("q", "y", 1, "c", 1)];
    twoGroups.push(...[sampled("r", "x", 0, "d", 0), sampled("r", "y", 0, "d", 1)]);
    expect((await trainer.train(twoGroups, {})).skipReason).toBe(
      "all 2 groups had constant reward: nothing to learn from",
    );
  });

  it("a step with no token to train says so", async () => {
    const { ctx, optimSteps } = await context("remote_api_cross_entropy", "learning_rate: 0.01");
    const trainer = new CrossEntropyTrainer(ctx);
    const untrained = sft("hello", "ello-hay");
    untrained.lossMask.fill(0);
    expect(await trainer.train([untrained], {})).toEqual({
      trajectories: [untrained],
      datums: 0,
      stepped: false,
      skipReason:
        "none of the 1 trajectories carries a training signal (every advantage or loss weight is 0, or no token is trained): nothing to learn from",
    });
    expect(optimSteps).toHaveLength(0);
  });

  it("GRPO with a KL penalty shapes per-token advantages against the initial weights", async () => {
    const { ctx } = await context("remote_api_grpo", "learning_rate: 0.001, loss_fn: ppo");
    const trainer = new GrpoTrainer(ctx, { estimator: "dr_grpo", klPenalty: { coef: 0.5 } });
    const metrics: Record<string, number> = {};
    const result = await trainer.train([sampled("q", "1", 1, "a", 0), sampled("q", "22", 0, "a", 1)], metrics);
    expect(metrics["train/kl_policy_reference"]).toBeCloseTo(0, 4);
    const [win, lose] = result.trajectories;
    expect(win!.advantage).toBe(0.5);
    expect(win!.advantages!.filter((_, i) => win!.lossMask[i] === 1).every((a) => Math.abs(a - 0.5) < 1e-3)).toBe(true);
    expect(lose!.advantages!.filter((_, i) => lose!.lossMask[i] === 0).every((a) => a === 0)).toBe(true);
  });

  it("on-policy distillation turns the teacher's logprobs into per-token advantages", async () => {
    const { ctx } = await context(
      "remote_api_opd",
      "learning_rate: 0.001, kl_penalty_coef: 2",
      ", teachers: [{base_model: tiny}]",
    );
    const trainer = new OnPolicyDistillationTrainer(ctx);
    const metrics: Record<string, number> = {};
    const batch = [sampled("What is 1 + 1?", "2", 0, "a", 0), sampled("What is 5 + 1?", "6", 0, "b", 0)];
    const result = await trainer.train(batch, metrics);
    const trained = batch.reduce((n, t) => n + t.numLossTokens, 0);
    expect(metrics["opd/valid_tokens"]).toBe(trained);
    expect(Math.abs(metrics["opd/teacher_kl"]!)).toBeGreaterThan(0.01);
    const [first] = result.trajectories;
    const teacher = await (await ctx.service.createSamplingClient("tiny")).computeLogprobs(first!.tokens);
    const t = first!.tokens.length - 1;
    expect(first!.advantages![t]).toBeCloseTo(-2 * (first!.logprobs![t]! - teacher[t]!), 9);
    expect(metrics["train/num_datums"]).toBe(2);
  });

  it("runs a custom prepareTrajectories (the Weaver guide's trainer) and reports its metrics", async () => {
    const { ctx } = await context("remote_api_grpo", "learning_rate: 0.001");
    class MyAlgorithmTrainer extends BaseTrainer {
      protected prepareTrajectories(trajectories: Trajectory[], metrics: Record<string, number>) {
        for (const traj of trajectories) traj.advantage = traj.reward;
        metrics["my/trajectories"] = trajectories.length;
        return trajectories;
      }
    }
    const metrics: Record<string, number> = {};
    const result = await new MyAlgorithmTrainer(ctx).train(
      [sampled("q", "a", 1, "a", 0), sampled("q", "b", 0.5, "a", 1)],
      metrics,
    );
    expect(result.trajectories.map((t) => t.advantage)).toEqual([1, 0.5]);
    expect(metrics).toMatchObject({ "my/trajectories": 2, "train/num_datums": 2 });
    class Forgetful extends BaseTrainer {
      protected prepareTrajectories(trajectories: Trajectory[]) {
        return trajectories;
      }
    }
    await expect(new Forgetful(ctx).train([sampled("q", "a", 1, "g", 4)], {})).rejects.toThrow(
      new InputError(
        "trajectory (group g, run 4) has neither advantage nor advantages; prepareTrajectories must set one for importance_sampling",
      ),
    );
  });
});

describe("the trainers' names before the rename", () => {
  it("are the renamed classes themselves, so code written against them extends, constructs and loads as before", async () => {
    const root = await import("../../src/index.js");
    expect([
      root.RemoteApiTrainer,
      root.RemoteApiCrossEntropyTrainer,
      root.RemoteApiGrpoTrainer,
      root.RemoteApiOpdTrainer,
      root.RemoteApiPreferenceTrainer,
      root.RemoteApiDpoTrainer,
      root.RemoteApiRewardModelTrainer,
    ]).toEqual([
      root.BaseTrainer,
      root.CrossEntropyTrainer,
      root.GrpoTrainer,
      root.OnPolicyDistillationTrainer,
      root.PreferenceTrainer,
      root.DpoTrainer,
      root.RewardModelTrainer,
    ]);
    // A subclass declared with an old name is a GrpoTrainer to the run (the group-size check reads it).
    class OldStyle extends root.RemoteApiGrpoTrainer {}
    expect(isDerivedFrom(OldStyle, GrpoTrainer)).toBe(true);
    expect(isDerivedFrom(OldStyle, BaseTrainer)).toBe(true);
  });
});
