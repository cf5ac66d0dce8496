import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import { tokenCost } from "../../src/outputs/accounting.js";
import type { MetricsRow } from "../../src/outputs/events.js";
import { additionRows, fixture, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** What the counting worker logged of one rollout. */
interface Sampled {
  val: boolean;
  batch: number;
  prompt: number;
  completion: number;
}

const PRICES = { prompt: 2, completion: 8, train: 3 };

/** SFT on what the counting worker samples (every trajectory is trained), validating before training and at step 2. */
function recipeYaml(steps: number): string {
  return `
data: {data_files: [train.jsonl], batch_size: 2, rollout_repeat_n: 2, seed: 7, max_prompt_length: 40}
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: ${fixture("counting-worker.ts")}
  custom_rollout_worker_class_name: CountingWorker
  num_workers: 3
  max_response_length: 12
  max_sequence_length: 64
trainer: {type: remote_api_cross_entropy, total_train_steps: ${steps}, save_freq: 1}
validate:
  validate_before_train: true
  data: {data_files: [val.jsonl]}
  eval: {validate_freq: 2}
accounting:
  prices: {prompt: ${PRICES.prompt}, completion: ${PRICES.completion}, train: ${PRICES.train}}
service:
  train_service: {backend: local, model: tiny, config: {loss_fn: cross_entropy, learning_rate: 0.01}}
`;
}

async function project(steps: number) {
  const dir = await tempDir();
  const log = join(dir, "sampled.jsonl");
  await writeJsonl(
    join(dir, "train.jsonl"),
    additionRows(4).map((row) => ({ ...row, log })),
  );
  await writeJsonl(
    join(dir, "val.jsonl"),
    additionRows(2).map((row) => ({ ...row, log })),
  );
  const recipe = await writeRecipe(dir, recipeYaml(steps));
  const sampled = async (): Promise<Sampled[]> =>
    (await readFile(log, "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Sampled);
  return { dir, recipe, sampled };
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

describe("token and cost accounting", () => {
  it("records per step the tokens sampled and trained, their running totals, and cost = tokens × price", async () => {
    const { dir, recipe, sampled } = await project(3);
    const result = await runRecipe(recipe, { outputDir: join(dir, "out") });
    const rows = result.metrics;
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    const log = await sampled();
    // Rollouts for step k come from data batch k - 1; validation at step k (and before training, k = 0) samples pass k.
    const sampledFor = (step: number) => [
      ...log.filter((s) => !s.val && s.batch === step - 1),
      ...log.filter((s) => s.val && s.batch === step),
    ];
    const totals = { prompt: 0, completion: 0, trained: 0, cost: 0 };
    for (const row of rows) {
      const calls = sampledFor(row.step);
      const trainedOn = calls.filter((s) => !s.val);
      expect(calls.length, `rollouts of step ${row.step}`).toBe(row.step === 0 ? 2 : row.step === 2 ? 6 : 4);
      const expected = {
        prompt: sum(calls.map((s) => s.prompt)),
        completion: sum(calls.map((s) => s.completion)),
        // A trajectory of n tokens is one datum of n - 1 input tokens.
        trained: sum(trainedOn.map((s) => s.prompt + s.completion - 1)),
      };
      expect({
        prompt: row["tokens/prompt"],
        completion: row["tokens/completion"],
        trained: row["tokens/trained"],
      }).toEqual(expected);
      if (row.step > 0) expect(row["train/num_datums"]).toBe(trainedOn.length);
      totals.prompt += expected.prompt;
      totals.completion += expected.completion;
      totals.trained += expected.trained;
      const cost =
        (expected.prompt * PRICES.prompt + expected.completion * PRICES.completion + expected.trained * PRICES.train) /
        1e6;
      totals.cost += cost;
      expect(row["cost/step"]).toBeCloseTo(cost, 12);
      expect({
        prompt: row["tokens/prompt_total"],
        completion: row["tokens/completion_total"],
        trained: row["tokens/trained_total"],
      }).toEqual({ prompt: totals.prompt, completion: totals.completion, trained: totals.trained });
      expect(row["cost/total"]).toBeCloseTo(totals.cost, 12);
    }
    expect(totals.prompt).toBeGreaterThan(0);
    expect(totals.completion).toBeGreaterThan(0);
    expect(tokenCost({ prompt: 1e6, completion: 2e6, trained: 0 }, PRICES)).toBe(2 + 16);
    // The summary has the run's totals, and what the last row says.
    const figures = Object.fromEntries(result.summary.accounting.map((f) => [f.key, f.value]));
    expect(figures).toEqual({
      "cost/total": rows.at(-1)!["cost/total"],
      "tokens/completion_total": totals.completion,
      "tokens/prompt_total": totals.prompt,
      "tokens/trained_total": totals.trained,
    });
  });

  it("continues the totals of the checkpoint when a run resumes", async () => {
    const { dir, recipe } = await project(3);
    const out = join(dir, "out");
    const controller = new AbortController();
    const first = await runRecipe(recipe, {
      outputDir: out,
      signal: controller.signal,
      onEvent: (e) => e.type === "step" && e.step === 1 && controller.abort(),
    });
    expect(first.stopReason).toBe("aborted");
    const resumed = await runRecipe(recipe.path, { outputDir: out, overrides: ["resume.mode=auto"], env: {} });
    const rows: MetricsRow[] = resumed.metrics;
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    for (const kind of ["prompt", "completion", "trained"])
      expect(rows.at(-1)![`tokens/${kind}_total`]).toBe(sum(rows.map((r) => r[`tokens/${kind}`]!)));
    expect(rows.at(-1)!["cost/total"]).toBeCloseTo(sum(rows.map((r) => r["cost/step"]!)), 12);
  });
});
