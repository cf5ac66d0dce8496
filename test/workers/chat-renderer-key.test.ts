/**
 * `rollout_worker.chat_renderer`: the recipe's way to pick a renderer by family id, read where the
 * run loads its tokenizer (tokenizerOptions), and refused when it names no renderer.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tokenizerName, tokenizerOptions } from "../../src/run/preflight.js";
import { loadRecipe } from "../../src/recipe/index.js";
import type { HfTokenizer } from "../../src/inference/index.js";
import { loadTokenizer } from "../../src/inference/index.js";
import { ConfigError } from "../../src/errors.js";
import { lenmlFolder } from "../support/lenml.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

async function recipe(overrides: string[]) {
  const dir = await tempDir({ "recipe.yaml": MINIMAL_YAML, "train.jsonl": TRAIN_JSONL });
  return loadRecipe(join(dir, "recipe.yaml"), { cwd: dir, overrides });
}

describe("rollout_worker.chat_renderer", () => {
  it("loads the run's tokenizer with the renderer it names", async () => {
    const { config } = await recipe([
      `++rollout_worker.tokenizer=${lenmlFolder("gpt_oss")}`,
      "++rollout_worker.chat_renderer=gpt_oss",
    ]);
    expect(tokenizerOptions(config)).toEqual({ renderer: "gpt_oss" });
    const tok = await loadTokenizer(tokenizerName(config), tokenizerOptions(config));
    expect((tok as HfTokenizer).renderer).toBe("gpt_oss");
  }, 60_000);

  it("is refused at load for a tokenizer without the renderer's tokens, and at validation for an unknown family", async () => {
    const { config } = await recipe([
      `++rollout_worker.tokenizer=${lenmlFolder("qwen3")}`,
      "++rollout_worker.chat_renderer=llama3",
    ]);
    await expect(loadTokenizer(tokenizerName(config), tokenizerOptions(config))).rejects.toThrow(ConfigError);
    const error = await recipeError(recipe(["++rollout_worker.chat_renderer=mistral"]));
    expect(error.message).toContain("rollout_worker.chat_renderer");
    expect(error.message).toMatch(/llama3.*gpt_oss/);
    const unset = await recipe([]);
    expect(tokenizerOptions(unset.config)).toEqual({});
  }, 60_000);
});
