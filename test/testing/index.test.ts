import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../src/engine/index.js";
import { BaseRolloutWorker } from "../../src/contracts/rollout-worker.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import { LocalTrainingService } from "../../src/backends/index.js";
import { SamplerInferenceClient } from "../../src/inference/index.js";
import type { InferenceClient, InferenceOptions } from "../../src/contracts/inference.js";
import { rolloutTask, runRollout, seededRandom, workerSettings } from "../../src/testing/index.js";
import { InputError } from "../../src/errors.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** Samples a completion of the prompt, puts it, and returns a second trajectory rewarding its length. */
class TwoTrajectoryWorker extends BaseRolloutWorker {
  async rollout(task: RolloutTask) {
    const { promptTokens, responseTokens, logprobs } = await this.inferenceClient.completion(String(task.prompt));
    const tokens = [...promptTokens, ...responseTokens];
    const lossMask = [...promptTokens.map(() => 0), ...responseTokens.map(() => 1)];
    this.putTrajectory(
      new Trajectory({ tokens, lossMask, logprobs: [...promptTokens.map(() => 0), ...logprobs], reward: 1 }),
    );
    return { tokens, lossMask, reward: responseTokens.length };
  }
}

/** Keeps its putTrajectory for later, and returns a trajectory whose mask is too short. */
class BadWorker extends BaseRolloutWorker {
  late: (() => void) | undefined;
  rollout() {
    this.late = () => this.putTrajectory({ tokens: [1], lossMask: [1], reward: 0 });
    return { tokens: [1, 2, 3], lossMask: [1], reward: 0 };
  }
}

async function setUp() {
  const dir = await tempDir();
  await writeJsonl(`${dir}/train.jsonl`, [{ prompt: "abc" }]);
  const recipe = await writeRecipe(
    dir,
    "data: {data_files: [train.jsonl], rollout_repeat_n: 2}\nrollout_worker: {type: simple, max_response_length: 6}\ntrainer: {type: remote_api_grpo, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n",
  );
  const tokenizer = new ByteTokenizer();
  const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
  const samplingClient = await service.createSamplingClient("tiny");
  return {
    recipe: recipe.config,
    tokenizer,
    service,
    inferenceClient: new SamplerInferenceClient({ samplingClient, tokenizer, defaultMaxTokens: 6 }),
  };
}

describe("nexrl/testing", () => {
  it("runRollout runs a worker against the local engine: put trajectories first, then returned ones, validated", async () => {
    const { recipe, tokenizer, service, inferenceClient } = await setUp();
    try {
      const worker = new TwoTrajectoryWorker({ name: "test", settings: workerSettings(recipe), tokenizer });
      const [put, returned, ...rest] = await runRollout(worker, rolloutTask({ prompt: "abc" }), { inferenceClient });
      expect(rest).toEqual([]);
      expect(put).toBeInstanceOf(Trajectory);
      expect(returned).toBeInstanceOf(Trajectory);
      // The prompt is BOS + "abc"; the response is at most 6 sampled tokens.
      const responseLength = returned!.tokens.length - 4;
      expect(responseLength).toBeGreaterThan(0);
      expect(responseLength).toBeLessThanOrEqual(6);
      expect(returned!.reward).toBe(responseLength);
      expect(put!.tokens).toEqual(returned!.tokens);
      expect(put!.logprobs!.slice(4).every((lp) => lp <= 0)).toBe(true);
    } finally {
      await service.close();
    }
  });

  it("runRollout samples with the recipe's temperature and max_response_length, and refuses what max_sequence_length would", async () => {
    const dir = await tempDir();
    await writeJsonl(`${dir}/train.jsonl`, [{ prompt: "abc" }]);
    const { config } = await writeRecipe(
      dir,
      "data: {data_files: [train.jsonl], max_prompt_length: 8}\nrollout_worker: {type: simple, temperature: 0.5, max_response_length: 3, max_sequence_length: 11}\ntrainer: {type: remote_api_cross_entropy, total_train_steps: 1}\nservice: {train_service: {backend: local, model: tiny}}\n",
    );
    const tokenizer = new ByteTokenizer();
    const service = new LocalTrainingService({ outputDir: dir, seed: 0 });
    try {
      const samplingClient = await service.createSamplingClient("tiny");
      // The client's own default (256 tokens) is what a worker got before: the recipe's length must win.
      const sampler = new SamplerInferenceClient({ samplingClient, tokenizer });
      const sent: InferenceOptions[] = [];
      const recording: InferenceClient = Object.assign(Object.create(sampler) as InferenceClient, {
        completion: (prompt: string | number[], options: InferenceOptions = {}) => {
          sent.push(options);
          return sampler.completion(prompt, options);
        },
      });
      const worker = new TwoTrajectoryWorker({ name: "lengths", settings: workerSettings(config), tokenizer });
      const [put] = await runRollout(worker, rolloutTask({ prompt: "abc" }, { seed: 5 }), {
        inferenceClient: recording,
      });
      expect(sent).toEqual([expect.objectContaining({ temperature: 0.5, maxTokens: 3, seed: expect.any(Number) })]);
      expect(put!.tokens.length - 4).toBeLessThanOrEqual(3);
      // A trajectory longer than max_sequence_length (11) fails the rollout, as in a run.
      class LongWorker extends BaseRolloutWorker {
        rollout() {
          return {
            tokens: Array.from({ length: 12 }, () => 1),
            lossMask: Array.from({ length: 12 }, () => 1),
            reward: 0,
          };
        }
      }
      const long = new LongWorker({ name: "long", settings: workerSettings(config), tokenizer });
      await expect(runRollout(long, rolloutTask({ prompt: "abc" }))).rejects.toThrow(
        "tokens has length 12, more than rollout_worker.max_sequence_length (11)",
      );
    } finally {
      await service.close();
    }
  });

  it("runRollout reports an invalid trajectory, a worker with no inference client, and a putTrajectory after the end", async () => {
    const { recipe, tokenizer, service } = await setUp();
    try {
      const bad = new BadWorker({ name: "bad", settings: workerSettings(recipe), tokenizer });
      await expect(runRollout(bad, rolloutTask({ prompt: "x" }))).rejects.toThrow(InputError);
      expect(() => bad.late!()).toThrow(/putTrajectory is only available while rollout\(\) runs/);
      const sampler = new TwoTrajectoryWorker({ name: "sampler", settings: workerSettings(recipe), tokenizer });
      await expect(runRollout(sampler, rolloutTask({ prompt: "x" }))).rejects.toThrow(/no inference service/);
    } finally {
      await service.close();
    }
  });

  it("rolloutTask takes the prompt from the row unless given, with the defaults of a first training copy", () => {
    expect(rolloutTask({ prompt: "p", answer: 1 })).toEqual({
      data: { prompt: "p", answer: 1 },
      prompt: "p",
      index: 0,
      epoch: 0,
      batchIndex: 0,
      groupId: "test-group",
      runId: 0,
      groupSize: 1,
      isVal: false,
      seed: 0,
    });
    expect(rolloutTask({ q: "?" }, { prompt: "other", isVal: true, seed: 9 })).toMatchObject({
      prompt: "other",
      isVal: true,
      seed: 9,
    });
    const chat = [{ role: "user", content: "hi" }];
    expect(rolloutTask({ prompt: chat }).prompt).toEqual(chat);
    // Like the data loader, it refuses a prompt that is neither text nor chat messages.
    expect(() => rolloutTask({ q: "?" })).toThrow(InputError);
    expect(() => rolloutTask({ prompt: 42 })).toThrow(
      "rolloutTask: a task's prompt is text or a list of {role, content} chat messages; give it as data.prompt or fields.prompt (got 42)",
    );
  });

  it("seededRandom is the pipeline's reproducible stream", () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const draws = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(draws);
    expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(seededRandom(43)()).not.toBe(draws[0]);
  });
});
