/**
 * The worker registry without the composition root: the pipeline never imports the agent service,
 * so a program that loads only internal modules is told what to import instead.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { checkRecipe } from "../../src/run/preflight.js";
import { rolloutWorkerNotes } from "../../src/workers/registry.js";
import { loadRecipe } from "../../src/recipe/index.js";

const root = path.resolve(import.meta.dirname, "../..");

describe("the rollout worker registry", () => {
  it("refuses an agent recipe with what to import when no composition root provided the agent service", async () => {
    const recipe = await loadRecipe(path.join(root, "recipe/agent_tools/local.yaml"), { env: {}, cwd: root });
    const error = await checkRecipe(recipe, root).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(
      /agent of the agent service, which was not loaded; import nexrl's package root \("nexrl"\)/,
    );
  });

  it("checks an agent recipe through the agent service once the package root is loaded", async () => {
    await import("../../src/index.js");
    const file = path.join(root, "recipe/agent_tools/local.yaml");
    await expect(checkRecipe(await loadRecipe(file, { env: {}, cwd: root }), root)).resolves.toEqual([]);
    // Without an evaluator, the agent service's note says where the reward must come from.
    const { config } = await loadRecipe(file, { env: {}, cwd: root });
    const unscored = { ...config, rollout_worker: { ...config.rollout_worker, evaluator_module_path: undefined } };
    expect(await rolloutWorkerNotes(unscored)).toEqual([
      expect.stringMatching(
        /no evaluator_module_path, so each episode's reward must be the `reward` the agent returns/,
      ),
    ]);
  });
});
