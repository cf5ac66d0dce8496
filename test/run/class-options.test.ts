/**
 * `rollout_worker.options` and `trainer.options`: a custom worker and a custom trainer read them
 * typed, checked and completed by their classes' zod schemas, in a real run on the local engine;
 * options a schema refuses stop `nexrl validate` and the run before its first file, each issue
 * under its recipe key.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import { checkRecipe } from "../../src/run/preflight.js";
import { RecipeError } from "../../src/errors.js";
import { failure } from "../support/http-server.js";
import { additionRows, fixture, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const readJsonl = async (path: string) =>
  (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

/** A recipe running `worker` and `trainer` of the options fixture with the given options (YAML flow maps). */
function optionsRecipe(
  worker: { className: string; options?: string },
  trainerOptions?: string,
  trainerClass = "ScaledMetricTrainer",
): string {
  return `
data:
  data_files: [train.jsonl]
  batch_size: 2
  rollout_repeat_n: 2
  seed: 3
  max_prompt_length: 40
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: ${fixture("options-classes.ts")}
  custom_rollout_worker_class_name: ${worker.className}
${worker.options === undefined ? "" : `  options: ${worker.options}\n`}  num_workers: 2
  max_response_length: 6
trainer:
  type: custom
  custom_trainer_module_path: ${fixture("options-classes.ts")}
  custom_trainer_class_name: ${trainerClass}
${trainerOptions === undefined ? "" : `  options: ${trainerOptions}\n`}  total_train_steps: 2
service:
  train_service:
    backend: local
    model: tiny
    config: {loss_fn: cross_entropy, learning_rate: 0.01}
`;
}

async function recipeIn(yaml: string) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(4));
  return { dir, recipe: await writeRecipe(dir, yaml) };
}

/** The issues of the RecipeError `promise` rejects with. */
async function issuesOf(promise: Promise<unknown>) {
  const error = await failure(promise);
  expect(error).toBeInstanceOf(RecipeError);
  return (error as RecipeError).issues.map(({ keyPath, message }) => ({ keyPath, message }));
}

describe("class options", () => {
  it("reach a custom worker and a custom trainer typed, with their schemas' defaults filled", async () => {
    const { dir, recipe } = await recipeIn(
      optionsRecipe({ className: "FixedRewardWorker", options: "{reward: 0.75}" }, "{scale: 4, label: abc}"),
    );
    const result = await runRecipe(recipe, { outputDir: join(dir, "out") });
    expect(result.steps).toBe(2);
    const samples = await readJsonl(join(dir, "out", "samples.jsonl"));
    expect(samples).toHaveLength(8);
    for (const sample of samples) {
      expect(sample["reward"]).toBe(0.75);
      expect(sample["extra_fields"]).toMatchObject({ tag: "untagged" });
    }
    const trained = (await readJsonl(join(dir, "out", "metrics.jsonl"))).filter((row) => "custom/scale" in row);
    expect(
      trained.map((row) => [row["custom/scale"], row["custom/label_length"], row["custom/scaled_reward"]]),
    ).toEqual([
      [4, 3, 3],
      [4, 3, 3],
    ]);
  });

  it("are refused by the schema with each issue under its recipe key, before the run writes a file", async () => {
    const { dir, recipe } = await recipeIn(
      optionsRecipe({ className: "FixedRewardWorker", options: "{reward: 2, colour: red}" }, "{}"),
    );
    const expected = [
      {
        keyPath: "rollout_worker.options.reward",
        message: "Too big: expected number to be <=1 (checked by FixedRewardWorker.optionsSchema)",
      },
      {
        keyPath: "rollout_worker.options",
        message: 'Unrecognized key: "colour" (checked by FixedRewardWorker.optionsSchema)',
      },
    ];
    expect(await issuesOf(checkRecipe(recipe, dir, {}))).toEqual(expected);
    expect(await issuesOf(runRecipe(recipe, { outputDir: join(dir, "out") }))).toEqual(expected);
    expect(existsSync(join(dir, "out"))).toBe(false);

    // The trainer's options, when the worker's are right; none given at all counts as `{}`.
    const trainer = await recipeIn(optionsRecipe({ className: "FixedRewardWorker", options: "{reward: 0.5}" }));
    expect(await issuesOf(checkRecipe(trainer.recipe, trainer.dir, {}))).toEqual([
      {
        keyPath: "trainer.options.scale",
        message: "Invalid input: expected number, received undefined (checked by ScaledMetricTrainer.optionsSchema)",
      },
    ]);
  });

  it("reach a class without a schema as written, and a schema that is not a Standard Schema is named", async () => {
    const plain = await recipeIn(
      optionsRecipe({ className: "PlainOptionsWorker", options: "{reward: 0.25}" }, "{scale: 1}"),
    );
    await runRecipe(plain.recipe, { outputDir: join(plain.dir, "out") });
    const rewards = (await readJsonl(join(plain.dir, "out", "samples.jsonl"))).map((sample) => sample["reward"]);
    expect(rewards).toEqual(Array.from({ length: 8 }, () => 0.25));

    const bad = await recipeIn(
      optionsRecipe({ className: "BadSchemaWorker", options: "{reward: 0.25}" }, "{scale: 1}"),
    );
    expect(await issuesOf(checkRecipe(bad.recipe, bad.dir, {}))).toEqual([
      {
        keyPath: "rollout_worker.options",
        message:
          "BadSchemaWorker.optionsSchema is not a Standard Schema (zod ≥ 3.24, valibot ≥ 1 and ArkType ≥ 2 schemas are): declare one there, or remove it to take the options as written",
      },
    ]);
  });

  it("reach a trainer that implements Trainer itself, which the run trains with; a class that does neither is refused", async () => {
    const { dir, recipe } = await recipeIn(
      optionsRecipe(
        { className: "FixedRewardWorker", options: "{reward: 1}" },
        "{learningRate: 0.05}",
        "PlainLikelihoodTrainer",
      ),
    );
    const result = await runRecipe(recipe, { outputDir: join(dir, "out") });
    expect(result.steps).toBe(2);
    const trained = (await readJsonl(join(dir, "out", "metrics.jsonl"))).filter((row) => "plain/loss" in row);
    expect(trained.map((row) => row["plain/learning_rate"])).toEqual([0.05, 0.05]);
    for (const row of trained) expect(row["plain/loss"]).toBeGreaterThan(0);
    // The run saved its final checkpoint around the trainer, as for any other.
    expect(result.lastCheckpoint).toBe(join(dir, "out", "checkpoints", "step_000002.json"));

    const neither = await recipeIn(
      optionsRecipe({ className: "FixedRewardWorker", options: "{reward: 1}" }, undefined, "NotATrainer"),
    );
    const issues = await issuesOf(checkRecipe(neither.recipe, neither.dir, {}));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.keyPath).toBe("trainer.custom_trainer_module_path");
    expect(issues[0]!.message).toContain(
      "`NotATrainer` in " +
        fixture("options-classes.ts") +
        " does not extend BaseTrainer nor implement Trainer (it lacks saveSamplerWeights())",
    );
    expect(issues[0]!.message).toContain("or give it train() and saveSamplerWeights()");
  });
});
