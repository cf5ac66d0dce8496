import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/index.js";
import type { MetricsRow } from "../../src/outputs/events.js";
import { fixture, tempDir, writeFiles } from "../support/agent.js";

/** A two-step GRPO recipe on the tiny local model whose rollouts run `agent` through the gateway. */
async function agentRecipe(agent: string, trainer = "remote_api_grpo"): Promise<string> {
  const dir = await tempDir();
  const rows = ["hi", "hello", "hey", "yo"].map((question) => JSON.stringify({ question })).join("\n");
  const recipe = [
    "data: {data_files: [train.jsonl], prompt_key: question, batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 32, seed: 1}",
    `rollout_worker: {type: agent, agent_module_path: "${agent}", evaluator_module_path: "${fixture("evaluators.ts")}:CharacterEvaluator", num_workers: 2, max_response_length: 8, max_sequence_length: 128}`,
    "trajectory_pool: {batch_size: 4}",
    `trainer: {type: ${trainer}, total_train_steps: 2}`,
    `service: {train_service: {backend: local, model: tiny, config: {loss_fn: ${trainer === "remote_api_grpo" ? "importance_sampling" : "cross_entropy"}, learning_rate: 1e-3}}}`,
    "",
  ].join("\n");
  await writeFiles(dir, { "train.jsonl": `${rows}\n`, "recipe.yaml": recipe });
  return dir;
}

async function readJsonl<T>(path: string): Promise<T[]> {
  return (await readFile(path, "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as T);
}

describe("agents train through the gateway with runRecipe on the local backend", () => {
  it("a plain-openai agent: one trajectory per episode, no prefix break, training steps taken", async () => {
    const dir = await agentRecipe(fixture("openai-agent.ts"));
    const result = await runRecipe(join(dir, "recipe.yaml"), { outputDir: join(dir, "run"), env: {}, cwd: dir });
    expect([result.steps, result.stopReason]).toEqual([2, "completed"]);
    for (const row of result.metrics) {
      expect(row).toMatchObject({
        "agent/episodes": 4,
        "agent/trajectories": 4,
        "agent/calls": 12,
        "agent/prefix_breaks": 0,
        "agent/truncated_episodes": 0,
        "rollout/num_trajectories": 4,
      });
      expect(row["rollout/score/answer_chars_mean"]).toBeGreaterThanOrEqual(0);
    }
    expect(result.metrics.map((row) => row["train/skipped"])).toEqual([0, 0]);
    for (const row of result.metrics) expect(row["train/num_tokens"]).toBeGreaterThan(0);
    const samples = await readJsonl<{ prompt: string; response: string; diagnostics?: unknown }>(
      join(dir, "run", "samples.jsonl"),
    );
    expect(samples.length).toBeGreaterThan(0);
    for (const sample of samples) {
      expect(sample.prompt.startsWith("<|user|>\n")).toBe(true);
      expect(sample.response).toContain("<|user|>\ngo on<|assistant|>\n");
      expect(sample.diagnostics).toBeUndefined();
    }
  });

  it("counts the tokens of every call the agents made through the gateway in tokens/*", async () => {
    const dir = await agentRecipe(fixture("openai-agent.ts"), "remote_api_cross_entropy");
    const result = await runRecipe(join(dir, "recipe.yaml"), {
      outputDir: join(dir, "run"),
      env: {},
      cwd: dir,
      samplesPerStep: 100,
    });
    const samples = await readJsonl<{
      step: number;
      calls: Array<{ prompt_tokens: number; completion_tokens: number }>;
    }>(join(dir, "run", "samples.jsonl"));
    for (const row of result.metrics) {
      // Every episode is one trajectory (trained: cross-entropy keeps them all), and samples.jsonl has each.
      const calls = samples.filter((s) => s.step === row.step).flatMap((s) => s.calls);
      expect(calls).toHaveLength(12);
      expect([row["tokens/prompt"], row["tokens/completion"]]).toEqual([
        calls.reduce((n, c) => n + c.prompt_tokens, 0),
        calls.reduce((n, c) => n + c.completion_tokens, 0),
      ]);
    }
  });

  it("a drifting agent: every break is counted in metrics.jsonl and explained in samples.jsonl", async () => {
    const dir = await agentRecipe(`${fixture("drifting-agent.ts")}:drift`);
    const result = await runRecipe(join(dir, "recipe.yaml"), { outputDir: join(dir, "run"), env: {}, cwd: dir });
    expect(result.steps).toBe(2);
    const rows = await readJsonl<MetricsRow>(join(dir, "run", "metrics.jsonl"));
    for (const row of rows)
      expect(row).toMatchObject({
        "agent/episodes": 4,
        "agent/prefix_breaks": 8,
        "agent/trajectories": 12,
        "rollout/num_trajectories": 12,
      });
    const samples = await readJsonl<{ step: number; diagnostics?: Array<Record<string, unknown>> }>(
      join(dir, "run", "samples.jsonl"),
    );
    const explained = samples.flatMap((s) => s.diagnostics ?? []);
    expect(explained).toHaveLength(16);
    for (const d of explained) {
      expect(d).toMatchObject({
        kind: "prefix_break",
        first_differing_index: expect.any(Number),
        expected: expect.any(String),
        actual: expect.any(String),
      });
      expect([2, 3]).toContain(d.turn);
      expect(d.previous_turn).toBe((d.turn as number) - 1);
      expect(d.context).toMatch(/ \(attempt $/);
      expect(d.message).toMatch(
        /^turn [23] does not continue turn [12]: they first differ at token \d+ \(expected \d+, got \d+\); a new trajectory starts here$/,
      );
    }
  });
});
