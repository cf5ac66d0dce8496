import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { renderFiles as renderMath } from "../../recipe/math/data/make_data.js";
import { pigLatin, pigLatinWord, renderFiles as renderPigLatin } from "../../recipe/pig_latin/data/make_data.js";
import { makeRows as preferenceRows, renderFiles as renderPreference } from "../../recipe/preference/data/make_data.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { recipeError } from "../support/recipe.js";

const RECIPES = fileURLToPath(new URL("../../recipe/", import.meta.url));
const ENV_KEY: Record<string, string> = { tinker: "TINKER_API_KEY", weaver: "WEAVER_API_KEY" };

/** Every shipped recipe a user runs (the `common.yaml` files are only included by others). */
const shipped = readdirSync(RECIPES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .flatMap((entry) =>
    readdirSync(join(RECIPES, entry.name))
      .filter((name) => name.endsWith(".yaml") && name !== "common.yaml")
      .map((name) => `${entry.name}/${name}`),
  );

describe("shipped recipes", () => {
  it("include local, tinker and weaver variants of agent_tools, chat_sft, pig_latin and math, and the local preference recipes", () => {
    expect(shipped.sort()).toEqual([
      "agent_tools/local.yaml",
      "agent_tools/tinker.yaml",
      "agent_tools/weaver.yaml",
      "chat_sft/local.yaml",
      "chat_sft/tinker.yaml",
      "chat_sft/weaver.yaml",
      "math/local.yaml",
      "math/tinker.yaml",
      "math/weaver.yaml",
      "math/weaver_full_ft.yaml",
      "pig_latin/local.yaml",
      "pig_latin/tinker.yaml",
      "pig_latin/weaver.yaml",
      "preference/local.yaml",
      "preference/local_grpo_rm.yaml",
      "preference/local_reward_model.yaml",
    ]);
  });

  for (const name of shipped) {
    // `weaver_full_ft.yaml` is a weaver recipe: the backend is the file name up to the first `_`.
    const backend = name.split("/")[1]!.replace(".yaml", "").split("_")[0]!;
    const variable = ENV_KEY[backend];
    if (variable === undefined) {
      it(`${name} loads with no environment variables and uses the embedded engine`, async () => {
        const { config, files } = await loadRecipe(join(RECIPES, name), { env: {} });
        expect(config.service.train_service.backend).toBe("local");
        expect(config.service.inference_service.backend).toBe("local");
        expect(files).toEqual([join(RECIPES, name.replace(/[^/]+$/, "common.yaml")), join(RECIPES, name)]);
        for (const file of [...(config.data.data_files ?? []), ...(config.validate.data?.data_files ?? [])])
          expect(file.startsWith(join(RECIPES, name.split("/")[0]!, "data"))).toBe(true);
      });
    } else {
      it(`${name} loads when ${variable} is set, and names ${variable} when it is not`, async () => {
        const { config } = await loadRecipe(join(RECIPES, name), { env: { [variable]: "key-123456789" } });
        expect(config.service.train_service.backend).toBe(backend);
        expect(config.service[`${backend}_service` as "tinker_service"]).toMatchObject({
          api_key: "key-123456789",
          base_url: expect.stringMatching(/^https:\/\//),
        });
        const error = await recipeError(loadRecipe(join(RECIPES, name), { env: {} }));
        expect(error.issues).toHaveLength(1);
        expect(error.issues[0]).toMatchObject({
          keyPath: `service.${backend}_service.api_key`,
          message: expect.stringMatching(new RegExp(`^environment variable ${variable} is not set`)),
        });
      });
    }
  }
});

it("math/weaver_full_ft.yaml trains the whole model on Weaver", async () => {
  const { config } = await loadRecipe(join(RECIPES, "math/weaver_full_ft.yaml"), {
    env: { WEAVER_API_KEY: "key-123456789" },
  });
  expect(config.service.weaver_service?.training_mode).toBe("full_ft");
  expect(config.trainer.algorithm.learning_rate).toBe(1e-5);
});

describe("shipped data", () => {
  const committed = (folder: string, name: string): string => readFileSync(join(RECIPES, folder, "data", name), "utf8");

  it("is what the generators produce (run `npx tsx recipe/<name>/data/make_data.ts` after changing them)", () => {
    for (const [name, content] of Object.entries(renderPigLatin()))
      expect(committed("pig_latin", name), name).toBe(content);
    for (const [name, content] of Object.entries(renderMath())) expect(committed("math", name), name).toBe(content);
    for (const [name, content] of Object.entries(renderPreference()))
      expect(committed("preference", name), name).toBe(content);
  });

  it("has preference pairs whose chosen answer follows the instruction and whose rejected one does not", () => {
    const { train, val } = preferenceRows();
    expect([train.length, val.length]).toEqual([1200, 40]);
    for (const row of [...train, ...val]) {
      const [instruction, phrase] = row.prompt.split(": ") as [string, string];
      const [follow, other] =
        instruction === "lowercase" ? ["toLowerCase", "toUpperCase"] : ["toUpperCase", "toLowerCase"];
      expect(["lowercase", "uppercase"]).toContain(instruction);
      expect(row.chosen).toBe(phrase[follow as "toLowerCase"]());
      expect(row.rejected).toBe(phrase[other as "toLowerCase"]());
    }
    const lower = train.filter((row) => row.prompt.startsWith("lowercase")).length;
    expect(lower / train.length).toBeGreaterThan(0.4);
    expect(lower / train.length).toBeLessThan(0.6);
    const prompts = new Set(train.map((row) => row.prompt));
    for (const row of val) expect(prompts.has(row.prompt)).toBe(false);
  });

  it("has correct Pig Latin", () => {
    expect(
      ["hello", "world", "apple", "string", "quiet", "square", "my", "yellow", "rhythm", "i"].map(pigLatinWord),
    ).toEqual([
      "ello-hay",
      "orld-way",
      "apple-way",
      "ing-stray",
      "iet-quay",
      "are-squay",
      "y-may",
      "ellow-yay",
      "ythm-rhay",
      "i-way",
    ]);
    const rows = ["train.jsonl", "val.jsonl"].flatMap((name) =>
      committed("pig_latin", name)
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { input: string; output: string }),
    );
    expect(rows.length).toBeGreaterThanOrEqual(300);
    expect(new Set(rows.map((row) => row.input)).size).toBe(rows.length);
    for (const row of rows) expect(row.output).toBe(pigLatin(row.input));
  });

  it("has correct arithmetic answers and disjoint splits", () => {
    const split = (name: string) =>
      committed("math", name)
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { prompt: string; ground_truth: string });
    const [train, test] = [split("train.jsonl"), split("test.jsonl")];
    expect([train.length, test.length]).toEqual([400, 100]);
    for (const row of [...train, ...test]) {
      const [, a, op, b] = /^What is (\d+) ([-+*]) (\d+)\?$/.exec(row.prompt)!;
      const [x, y] = [Number(a), Number(b)];
      expect(row.ground_truth).toBe(String(op === "+" ? x + y : op === "-" ? x - y : x * y));
    }
    const trainPrompts = new Set(train.map((row) => row.prompt));
    expect(test.filter((row) => trainPrompts.has(row.prompt))).toEqual([]);
  });
});
