/**
 * Steps explain themselves (issue 15, item 5): a step with nothing to train says why, and
 * `samples.jsonl` keeps the rollouts it sampled whether or not they were trained on.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { RunEvent } from "../../src/outputs/events.js";
import type { SampleRow } from "../../src/outputs/samples.js";
import { additionRows, fixture, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const readRows = async <T>(path: string): Promise<T[]> =>
  (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as T);

describe("a GRPO step whose every group has a constant reward", () => {
  it("says why it trained nothing on the progress line and in its event, and samples.jsonl keeps its rollouts as untrained", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
    const recipe = await writeRecipe(
      dir,
      grpoRecipeYaml({
        worker: fixture("zero-reward-worker.ts"),
        className: "ZeroRewardWorker",
        steps: 2,
        extra: "logger: {backend: [console]}\n",
      }),
    );
    const events: RunEvent[] = [];
    let printed = "";
    const result = await runRecipe(recipe, {
      outputDir: join(dir, "out"),
      onEvent: (e) => events.push(e),
      progress: { write: (text: string) => (printed += text) },
      samplesPerStep: 3,
    });
    expect(result.steps).toBe(2);
    const reason = "all 2 groups had constant reward (every rollout got 0): nothing to learn from";
    const steps = events.filter((e) => e.type === "step");
    expect(
      steps.map((e) => [e.step, e.skipped, e.metrics["train/skipped"], e.metrics["train/groups_constant"]]),
    ).toEqual([
      [1, reason, 1, 2],
      [2, reason, 1, 2],
    ]);
    const lines = printed.split("\n").filter((line) => line.startsWith("step "));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(`^step 1/2 \\| reward 0\\.000 \\| nothing trained: ${reason.replace(/[()]/g, "\\$&")} \\| `),
    );
    expect(printed).not.toContain("loss -");
    // The run's summary counts the skipped steps.
    expect(printed).toContain("2 skipped training steps");

    const samples = await readRows<SampleRow>(join(dir, "out", "samples.jsonl"));
    expect(samples.map((s) => [s.step, s.trained, s.reward])).toEqual([
      [1, false, 0],
      [1, false, 0],
      [1, false, 0],
      [2, false, 0],
      [2, false, 0],
      [2, false, 0],
    ]);
    for (const sample of samples) {
      expect(sample.response).not.toBe("");
      expect(sample.extra_fields).toEqual({
        response: expect.any(String),
        finish_reason: expect.stringMatching(/^(stop|length)$/),
        expected: expect.stringMatching(/^\d+$/),
        verdict: "wrong",
      });
    }
  }, 60_000);
});
