import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { defineRecipe, loadRecipe } from "../../src/recipe/index.js";
import { TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

const DEFINE = JSON.stringify(fileURLToPath(new URL("../../src/recipe/define.ts", import.meta.url)));

const RECIPE_TS = `import { defineRecipe } from ${DEFINE};

const steps: number = 4;

export default defineRecipe({
  experiment_name: "ts-\${trainer.total_train_steps}",
  data: { data_files: ["train.jsonl"], prompt_key: "input", batch_size: "\${trainer.total_train_steps}" },
  rollout_worker: { type: "pig_latin" },
  trainer: { type: "remote_api_cross_entropy", total_train_steps: steps },
  service: { train_service: { backend: "local", model: "tiny" } },
});
`;

describe("TS recipes", () => {
  it("loads a defineRecipe default export, with interpolation and overrides", async () => {
    const dir = await tempDir({
      "package.json": '{ "type": "module" }\n',
      "train.jsonl": TRAIN_JSONL,
      "recipe.ts": RECIPE_TS,
    });
    const recipe = await loadRecipe(join(dir, "recipe.ts"), { overrides: ["trainer.total_train_steps=6"] });
    expect(recipe.config).toMatchObject({
      experiment_name: "ts-6",
      data: { batch_size: 6, data_files: [join(dir, "train.jsonl")] },
      trainer: { total_train_steps: 6 },
    });
    expect(recipe).toMatchObject({ path: join(dir, "recipe.ts"), dir, files: [join(dir, "recipe.ts")] });
  });

  it("loads .mts, .ts compiled as CommonJS and plain .js modules, and composes YAML defaults beside them", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "common.yaml":
        "data:\n  data_files: [train.jsonl]\nrollout_worker:\n  type: pig_latin\nservice:\n  train_service: {backend: local, model: tiny}\n",
      "recipe.mts": RECIPE_TS,
      "commonjs.ts": RECIPE_TS,
      "plain.js":
        "export default { defaults: ['common'], data: { rollout_repeat_n: 2 }, trainer: { type: 'remote_api_grpo', total_train_steps: 2 } };\n",
    });
    expect((await loadRecipe(join(dir, "recipe.mts"))).config.experiment_name).toBe("ts-4");
    expect((await loadRecipe(join(dir, "commonjs.ts"))).config.experiment_name).toBe("ts-4");
    const plain = await loadRecipe(join(dir, "plain.js"));
    expect(plain.config.trainer.algorithm.loss_fn).toBe("importance_sampling");
    expect(plain.files).toEqual([join(dir, "common.yaml"), join(dir, "plain.js")]);
  });

  it("validates with the same schema and names the module file", async () => {
    const dir = await tempDir({
      "package.json": '{ "type": "module" }\n',
      "train.jsonl": TRAIN_JSONL,
      "recipe.ts": RECIPE_TS.replace("prompt_key", "promt_key"),
    });
    const error = await recipeError(loadRecipe(join(dir, "recipe.ts")));
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "recipe.ts")}:\n  - data.promt_key: unknown key; did you mean \`prompt_key\`? (set in ${join(dir, "recipe.ts")})`,
    );
  });

  it("explains a module without a default export and one that throws", async () => {
    const dir = await tempDir({
      "package.json": '{ "type": "module" }\n',
      "named.ts": "export const recipe = {};\n",
      "throws.ts": "throw new Error('broken recipe');\n",
    });
    expect((await recipeError(loadRecipe(join(dir, "named.ts")))).issues[0]?.message).toBe(
      "the module must `export default defineRecipe({ ... })` (it exports `recipe`)",
    );
    expect((await recipeError(loadRecipe(join(dir, "throws.ts")))).issues[0]?.message).toMatch(
      new RegExp(`^cannot import the recipe module: broken recipe \\(at ${join(dir, "throws.ts")}:\\d+:\\d+\\)$`),
    );
  });

  it("types defineRecipe with what users write", () => {
    const recipe = defineRecipe({
      defaults: ["common", "_self_"],
      trainer: { type: "remote_api_grpo", total_train_steps: "${oc.decode:${oc.env:STEPS,5}}" },
      rollout_worker: { type: "single_turn_math" },
      data: { data_files: ["a.jsonl"] },
      service: { train_service: { backend: "tinker" }, tinker_service: { api_key: "${oc.env:TINKER_API_KEY}" } },
    });
    expect(recipe.defaults).toEqual(["common", "_self_"]);
    // @ts-expect-error unknown trainer type
    defineRecipe({ trainer: { type: "remote_api_sft", total_train_steps: 1 } });
    // @ts-expect-error misspelt key
    defineRecipe({ trainer: { type: "custom", total_train_step: 1 } });
  });
});
