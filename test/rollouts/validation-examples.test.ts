import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { RunEvent, RunValidationEvent } from "../../src/outputs/events.js";
import type { RolloutTask } from "../../src/contracts/task.js";
import { formatValidationExamples, validationExamples } from "../../src/rollouts/validation-examples.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { pigLatinRows, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** A validation task with the given prompt. */
function task(prompt: RolloutTask["prompt"], index: number): RolloutTask {
  return {
    data: {},
    prompt,
    index,
    epoch: 0,
    batchIndex: 0,
    groupId: `0-${index}`,
    runId: 0,
    groupSize: 1,
    isVal: true,
    seed: index,
  };
}

/** A finished rollout whose extra fields are `extraFields`. */
function trajectory(reward: number, extraFields: Record<string, unknown>): Trajectory {
  return new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward, extraFields });
}

describe("validation examples", () => {
  it("are the first rollouts with a text response, with the target the worker recorded", () => {
    const outcomes = [
      {
        task: task("the dog", 0),
        trajectories: [trajectory(0.5, { response: " e-thay og-day", answer: "e-thay og-day" })],
      },
      { task: task("no response", 1), trajectories: [trajectory(0, { finish_reason: "stop" })] },
      { task: task("failed", 2), trajectories: [] },
      {
        task: task(
          [
            { role: "system", content: "be brief" },
            { role: "user", content: "What is 2 + 3?" },
          ],
          3,
        ),
        trajectories: [trajectory(1, { response: "5", ground_truth: "5" })],
      },
      {
        task: task("code fox?", 4),
        trajectories: [trajectory(0.2, { response: "244", evaluation: { expected: "480", answer: "244" } })],
      },
      { task: task("one too many", 5), trajectories: [trajectory(1, { response: "x" })] },
    ];
    expect(validationExamples(outcomes)).toEqual([
      { input: "the dog", output: " e-thay og-day", target: "e-thay og-day", reward: 0.5 },
      { input: "What is 2 + 3?", output: "5", target: "5", reward: 1 },
      { input: "code fox?", output: "244", target: "480", reward: 0.2 },
    ]);
    expect(validationExamples(outcomes, 10).at(-1)).toEqual({ input: "one too many", output: "x", reward: 1 });
  });

  it("print one line each, newlines shown as ⏎ and long texts cut", () => {
    expect(
      formatValidationExamples([
        { input: "the dog", output: " e-thay og-day", target: "e-thay og-day", reward: 0.5 },
        { input: "a\nb", output: "", reward: 0 },
        { input: "x".repeat(150), output: "y", reward: 1 },
      ]),
    ).toEqual([
      "  the dog → e-thay og-day (target: e-thay og-day, reward 0.500)",
      "  a ⏎ b → (nothing) (reward 0.000)",
      `  ${"x".repeat(99)}… → y (reward 1.000)`,
    ]);
  });

  it("are printed under each validation line of a run, with the same rows each time", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), pigLatinRows(8));
    await writeJsonl(join(dir, "val.jsonl"), pigLatinRows(5));
    const recipe = await writeRecipe(
      dir,
      `data: {data_files: [train.jsonl], prompt_key: input, batch_size: 4, max_prompt_length: 32}
rollout_worker: {type: pig_latin, max_response_length: 24, max_sequence_length: 80}
trainer: {type: remote_api_cross_entropy, total_train_steps: 2}
validate:
  validate_before_train: true
  data: {data_files: [val.jsonl], prompt_key: input, batch_size: 5, max_prompt_length: 32}
  eval: {validate_freq: 2}
service: {train_service: {backend: local, model: tiny, config: {learning_rate: 0.01}}}
`,
    );
    let printed = "";
    const events: RunEvent[] = [];
    await runRecipe(recipe, {
      outputDir: join(dir, "out"),
      progress: { write: (text: string) => (printed += text) },
      onEvent: (e) => events.push(e),
    });
    const validations = events.filter((e): e is RunValidationEvent => e.type === "validation");
    expect(validations.map((v) => v.step)).toEqual([0, 2]);
    const rows = pigLatinRows(5);
    for (const v of validations) {
      expect(v.examples?.map((e) => [e.input, e.target])).toEqual(rows.slice(0, 3).map((r) => [r.input, r.output]));
      const lines = printed.split("\n");
      const at = lines.findIndex((line) => line.startsWith(`validation at step ${v.step}:`));
      expect(lines.slice(at + 1, at + 4)).toEqual(formatValidationExamples(v.examples!));
      // the reward printed is the word accuracy of the output printed
      for (const e of v.examples!) {
        const got = e.output.trim().split(/\s+/);
        const want = e.target!.split(" ");
        expect(e.reward).toBeCloseTo(want.filter((w, i) => got[i] === w).length / want.length, 12);
      }
    }
  });
});
