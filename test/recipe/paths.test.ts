import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadRecipe, parseModuleReference, resolveRecipePath } from "../../src/recipe/index.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

describe("recipe paths", () => {
  it("resolves beside the recipe first, then from the current directory", async () => {
    const recipeDir = await tempDir({
      "r/train.jsonl": TRAIN_JSONL,
      "r/recipe.yaml": MINIMAL_YAML.replace("[train.jsonl]", "[train.jsonl, extra.jsonl]"),
    });
    const cwd = await tempDir({ "train.jsonl": TRAIN_JSONL, "extra.jsonl": TRAIN_JSONL });
    const { config } = await loadRecipe(join(recipeDir, "r/recipe.yaml"), { cwd });
    expect(config.data.data_files).toEqual([join(recipeDir, "r/train.jsonl"), join(cwd, "extra.jsonl")]);
  });

  it("resolves a relative recipe path and absolute data paths", async () => {
    const cwd = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "sub/recipe.yaml": MINIMAL_YAML.replace("[train.jsonl]", '["${oc.env:DATA}/train.jsonl"]'),
    });
    const recipe = await loadRecipe("sub/recipe.yaml", { cwd, env: { DATA: cwd } });
    expect(recipe).toMatchObject({ path: join(cwd, "sub/recipe.yaml"), dir: join(cwd, "sub") });
    expect(recipe.config.data.data_files).toEqual([join(cwd, "train.jsonl")]);
  });

  it("lists both places tried, for every missing path, with the key path", async () => {
    const recipeDir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "recipe.yaml": `${MINIMAL_YAML.replace("[train.jsonl]", "[train.jsonl, missing.jsonl]")}validate:\n  data:\n    data_files: [val.jsonl]\n`,
    });
    const cwd = await tempDir();
    const error = await recipeError(
      loadRecipe(join(recipeDir, "recipe.yaml"), {
        cwd,
        overrides: [
          "rollout_worker.evaluator_module_path=ev.ts:Judge",
          "trainer.type=custom",
          "trainer.custom_trainer_module_path=t.ts",
        ],
      }),
    );
    const tried = (name: string): string =>
      `tried ${join(recipeDir, name)} (beside the recipe) and ${join(cwd, name)} (current directory)`;
    expect(error.message).toBe(
      `Invalid recipe ${join(recipeDir, "recipe.yaml")}:\n` +
        `  - data.data_files[1]: \`missing.jsonl\` not found; ${tried("missing.jsonl")} (set in ${join(recipeDir, "recipe.yaml")}:2)\n` +
        `  - validate.data.data_files[0]: \`val.jsonl\` not found; ${tried("val.jsonl")} (set in ${join(recipeDir, "recipe.yaml")}:14)\n` +
        `  - rollout_worker.evaluator_module_path: \`ev.ts\` not found; ${tried("ev.ts")} (set in command-line override \`rollout_worker.evaluator_module_path=ev.ts:Judge\`)\n` +
        `  - trainer.custom_trainer_module_path: \`t.ts\` not found; ${tried("t.ts")} (set in command-line override \`trainer.custom_trainer_module_path=t.ts\`)`,
    );
  });

  it("makes module paths absolute, keeping the export name", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "agent/ev.ts": "",
      "agent/agent.yaml": "",
      "w.ts": "",
      "recipe.yaml": MINIMAL_YAML,
    });
    const { config } = await loadRecipe(join(dir, "recipe.yaml"), {
      overrides: [
        "rollout_worker.type=nexau",
        "+rollout_worker.evaluator_module_path=agent/ev.ts:Judge",
        "+rollout_worker.nexau_agent_config_path=agent/agent.yaml",
        "+rollout_worker.nexau_agent_workspace=agent",
      ],
    });
    expect(config.rollout_worker).toMatchObject({
      evaluator_module_path: `${join(dir, "agent/ev.ts")}:Judge`,
      nexau_agent_config_path: join(dir, "agent/agent.yaml"),
      nexau_agent_workspace: join(dir, "agent"),
    });
    const custom = await loadRecipe(join(dir, "recipe.yaml"), {
      overrides: ["rollout_worker.type=custom", "+rollout_worker.custom_rollout_worker_module_path=w.ts"],
    });
    expect(custom.config.rollout_worker.custom_rollout_worker_module_path).toBe(join(dir, "w.ts"));
  });

  it("exports a resolver for later layers", async () => {
    const recipeDir = await tempDir({ "a.txt": "" });
    const cwd = await tempDir({ "b.txt": "" });
    expect(resolveRecipePath("a.txt", { recipeDir, cwd, keyPath: "x" })).toBe(join(recipeDir, "a.txt"));
    expect(resolveRecipePath("b.txt", { recipeDir, cwd, keyPath: "x" })).toBe(join(cwd, "b.txt"));
    expect(() =>
      resolveRecipePath("c.txt", { recipeDir, cwd, keyPath: "rollout_worker.trace_path", file: "/r.yaml" }),
    ).toThrow(
      `Invalid recipe /r.yaml:\n  - rollout_worker.trace_path: \`c.txt\` not found; tried ${join(recipeDir, "c.txt")} (beside the recipe) and ${join(cwd, "c.txt")} (current directory)`,
    );
  });

  it("splits module references at the last colon before an identifier", () => {
    expect(parseModuleReference("agent/ev.ts:Judge")).toEqual({ modulePath: "agent/ev.ts", exportName: "Judge" });
    expect(parseModuleReference("ev.ts")).toEqual({ modulePath: "ev.ts", exportName: "default" });
    expect(parseModuleReference("C:\\work\\ev.ts")).toEqual({ modulePath: "C:\\work\\ev.ts", exportName: "default" });
  });
});
