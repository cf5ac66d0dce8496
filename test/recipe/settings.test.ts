import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { trainerSettings, workerSettings } from "../../src/recipe/settings.js";
import { mathJudgeOf } from "../../src/rewards/math-judge.js";
import { tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** A parsed recipe from YAML written to a fresh folder. */
async function recipe(yaml: string) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), [{ prompt: "p" }]);
  return (await writeRecipe(dir, yaml)).config;
}

describe("worker and trainer settings", () => {
  it("give trainers the hyper-parameters in camelCase, merged from both places of the recipe, and the teacher", async () => {
    const config = await recipe(
      `data: {data_files: [train.jsonl]}
rollout_worker: {type: simple}
trainer:
  type: remote_api_opd
  total_train_steps: 7
  teachers: [{base_model: tiny, checkpoint: "local://teacher"}]
  algorithm: {kl_penalty_coef: 0.5, kl_discount_factor: 0.9, loss_fn_config: {clip_high_threshold: 1.3}}
service: {train_service: {backend: local, model: tiny, config: {learning_rate: 0.002, weight_decay: 0.1, grad_clip_norm: 0.5, beta2: 0.99}}}
`,
    );
    expect(trainerSettings(config)).toEqual({
      algorithm: {
        lossFn: "importance_sampling",
        lossFnConfig: { clip_high_threshold: 1.3 },
        learningRate: 0.002,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weightDecay: 0.1,
        gradClipNorm: 0.5,
        entropyCoeff: 0,
        klPenaltyCoef: 0.5,
        klDiscountFactor: 0.9,
      },
      teacher: { baseModel: "tiny", checkpoint: "local://teacher" },
      totalTrainSteps: 7,
      dpo: { beta: 0.1, reference: undefined },
    });
  });

  it("give the DPO trainer its beta and reference from trainer.dpo, and the math worker its reward model", async () => {
    const dpo = await recipe(
      `data: {data_files: [train.jsonl]}
rollout_worker: {type: preference}
trainer: {type: remote_api_dpo, total_train_steps: 3, dpo: {beta: 0.3, reference: "local://ref"}}
service: {train_service: {backend: local, model: tiny}}
`,
    );
    expect(trainerSettings(dpo).dpo).toEqual({ beta: 0.3, reference: "local://ref" });
    const graded = await recipe(
      `data: {data_files: [train.jsonl], rollout_repeat_n: 2}
rollout_worker:
  type: single_turn_math
  agent: {math: {judge_mode: reward_model}}
  reward_model: {sampler_path: "runs/rm/sampler_weights/step_000200.nxw"}
trainer: {type: remote_api_grpo, total_train_steps: 3}
service: {train_service: {backend: local, model: tiny}}
`,
    );
    expect(workerSettings(graded).rewardModel).toEqual({ samplerPath: "runs/rm/sampler_weights/step_000200.nxw" });
    expect(workerSettings(graded).mathJudge).toBeUndefined();
  });

  it("give workers their rollout_worker settings in camelCase, one object per recipe, and no judge under judge_mode rule", async () => {
    const config = await recipe(
      `data: {data_files: [train.jsonl], rollout_repeat_n: 2, max_prompt_length: 20}
rollout_worker:
  type: agent
  agent_module_path: agent.ts
  temperature: 0.7
  max_response_length: 12
  max_sequence_length: 40
  task_name: demo
  enable_trace_prefix_merge: false
  agent: {max_turns: 3, max_tokens: 30, timeout_seconds: 5, truncated_reward: null, trajectory_weight: one, replay_answers: text, gateway: {port: 4567}}
trainer: {type: remote_api_grpo, total_train_steps: 1}
service: {train_service: {backend: local, model: tiny}, inference_service: {tool_parser: qwen3_coder, reasoning_parser: qwen3}}
`,
    );
    const settings = workerSettings(config);
    expect(settings).toEqual({
      temperature: 0.7,
      maxResponseLength: 12,
      maxSequenceLength: 40,
      taskName: "demo",
      enableTracePrefixMerge: false,
      agent: {
        math: { judgeMode: "rule" },
        maxTurns: 3,
        maxTokens: 30,
        timeoutSeconds: 5,
        truncatedReward: null,
        trajectoryWeight: "one",
        replayAnswers: "text",
        external: false,
        gateway: { host: "127.0.0.1", port: 4567, allowedHosts: [], corsOrigins: [] },
        toolParser: "qwen3_coder",
        reasoningParser: "qwen3",
      },
      mathJudge: undefined,
      sft: { trainOn: "all_assistant_messages" },
    });
    // The run's workers share one settings object, and with it what hangs off it (the math judge).
    expect(workerSettings(config)).toBe(settings);
    expect(mathJudgeOf(settings)).toBeUndefined();
  });

  it("carry the math worker's LLM judge without its key, which is read from the named variable when the judge is made", async () => {
    const config = await recipe(
      `data: {data_files: [train.jsonl], rollout_repeat_n: 2}
rollout_worker:
  type: single_turn_math
  agent: {math: {judge_mode: rule+llm_judge}}
  judge: {base_url: "http://127.0.0.1:9/v1", model: judge, api_key_env: NEXRL_TEST_SETTINGS_JUDGE_KEY, mode: group_rank, timeout_seconds: 2}
trainer: {type: remote_api_grpo, total_train_steps: 1}
service: {train_service: {backend: local, model: tiny}}
`,
    );
    const settings = workerSettings(config);
    expect(settings.mathJudge).toMatchObject({
      judgeMode: "rule+llm_judge",
      mode: "group_rank",
      apiKeyEnv: "NEXRL_TEST_SETTINGS_JUDGE_KEY",
      judge: { baseUrl: "http://127.0.0.1:9/v1", model: "judge", timeoutMs: 2000, maxRetries: 2, cache: true },
    });
    expect(JSON.stringify(settings)).not.toContain('apiKey"');
    expect(() => mathJudgeOf(settings)).toThrow(
      "rollout_worker.judge.api_key_env names NEXRL_TEST_SETTINGS_JUDGE_KEY, which is not set",
    );
    process.env.NEXRL_TEST_SETTINGS_JUDGE_KEY = "secret";
    try {
      const judge = mathJudgeOf(settings)!;
      expect([judge.mode, judge.judgeMode]).toEqual(["group_rank", "rule+llm_judge"]);
      expect(mathJudgeOf(settings)).toBe(judge);
    } finally {
      delete process.env.NEXRL_TEST_SETTINGS_JUDGE_KEY;
    }
  });
});
