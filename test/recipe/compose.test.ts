import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { composeRecipe } from "../../src/recipe/compose.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

const COMMON = `a: 1
b:
  x: 1
  y: 2
l: [1, 2, 3]
`;

describe("defaults composition", () => {
  it("merges maps key by key and replaces lists when _self_ is last", async () => {
    const dir = await tempDir({
      "common.yaml": COMMON,
      "main.yaml": "defaults: [common, _self_]\nb:\n  x: 10\nl: [9]\n",
    });
    const composed = await composeRecipe(join(dir, "main.yaml"));
    expect(composed.data).toEqual({ a: 1, b: { x: 10, y: 2 }, l: [9] });
    expect(composed.files).toEqual([join(dir, "common.yaml"), join(dir, "main.yaml")]);
  });

  it("lets later defaults override the file's own keys when _self_ comes first", async () => {
    const dir = await tempDir({
      "common.yaml": COMMON,
      "main.yaml": "defaults: [_self_, common]\nb:\n  x: 10\n  z: 3\nl: [9]\n",
    });
    const composed = await composeRecipe(join(dir, "main.yaml"));
    expect(composed.data).toEqual({ a: 1, b: { x: 1, y: 2, z: 3 }, l: [1, 2, 3] });
    expect(composed.files).toEqual([join(dir, "main.yaml"), join(dir, "common.yaml")]);
  });

  it("puts the file's own keys last when _self_ is absent, as Hydra does", async () => {
    const dir = await tempDir({ "common.yaml": COMMON, "main.yaml": "defaults: [common]\na: 2\n" });
    const composed = await composeRecipe(join(dir, "main.yaml"));
    expect(composed.data.a).toBe(2);
  });

  it("merges several defaults in list order and follows nested defaults, subfolders and explicit extensions", async () => {
    const dir = await tempDir({
      "base/root.yaml": "a: root\nb: root\nc: root\nd: root\n",
      "base/mid.yml": "defaults: [root]\nb: mid\nc: mid\n",
      "extra.yaml": "c: extra\n",
      "main.yaml": "defaults: [base/mid, extra.yaml, _self_]\nd: main\n",
    });
    const composed = await composeRecipe(join(dir, "main.yaml"));
    expect(composed.data).toEqual({ a: "root", b: "mid", c: "extra", d: "main" });
    expect(composed.files).toEqual(
      ["base/root.yaml", "base/mid.yml", "extra.yaml", "main.yaml"].map((name) => join(dir, name)),
    );
  });

  it("lets a map replace null and null replace a map", async () => {
    const dir = await tempDir({
      "common.yaml": "service: null\ntrainer:\n  algorithm: {loss_fn: ppo}\n",
      "main.yaml": "defaults: [common]\nservice:\n  train_service: {backend: local}\ntrainer:\n  algorithm: null\n",
    });
    const composed = await composeRecipe(join(dir, "main.yaml"));
    expect(composed.data).toEqual({ service: { train_service: { backend: "local" } }, trainer: { algorithm: null } });
  });

  it("reports a cycle with the whole chain", async () => {
    const dir = await tempDir({ "a.yaml": "defaults: [b]\n", "b.yaml": "x: 1\ndefaults:\n  - a\n" });
    const error = await recipeError(composeRecipe(join(dir, "a.yaml")));
    expect(error.issues).toEqual([
      {
        keyPath: "defaults[0]",
        message: `defaults cycle: ${join(dir, "a.yaml")} → ${join(dir, "b.yaml")} → ${join(dir, "a.yaml")}`,
        definedIn: `${join(dir, "b.yaml")}:3`,
      },
    ]);
    expect(error.file).toBe(join(dir, "a.yaml"));
  });

  it("names the files tried for a missing default and suggests a close name", async () => {
    const dir = await tempDir({ "common.yaml": "a: 1\n", "main.yaml": "defaults: [commn, _self_]\n" });
    const error = await recipeError(composeRecipe(join(dir, "main.yaml")));
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "main.yaml")}:\n` +
        `  - defaults[0]: cannot find \`commn\` (tried ${join(dir, "commn.yaml")}, ${join(dir, "commn.yml")}); did you mean \`common\`? (set in ${join(dir, "main.yaml")}:1)`,
    );
  });

  it("rejects Hydra config-group entries and a second _self_", async () => {
    const dir = await tempDir({
      "groups.yaml": "defaults:\n  - db: mysql\n",
      "twice.yaml": "defaults: [_self_, _self_]\n",
    });
    expect((await recipeError(composeRecipe(join(dir, "groups.yaml")))).issues[0]).toMatchObject({
      keyPath: "defaults[0]",
      message: expect.stringContaining("config groups like `db: mysql` are not supported"),
    });
    expect((await recipeError(composeRecipe(join(dir, "twice.yaml")))).issues[0]?.message).toBe(
      "`_self_` may appear only once",
    );
  });

  it("reports YAML syntax errors with their line", async () => {
    const dir = await tempDir({ "bad.yaml": "a: 1\na: 2\n" });
    const error = await recipeError(composeRecipe(join(dir, "bad.yaml")));
    expect(error.issues[0]?.message).toMatch(/^YAML syntax error at line 2, column 1: Map keys must be unique/);
  });

  it("tells which composed file and line set a key the schema rejects", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      "common.yaml": MINIMAL_YAML.replace("data:\n", "data:\n  batchsize: 4\n"),
      "local.yaml": "defaults: [common, _self_]\ntrainer:\n  total_train_steps: 5\n",
    });
    const error = await recipeError(loadRecipe(join(dir, "local.yaml")));
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "local.yaml")}:\n` +
        `  - data.batchsize: unknown key; did you mean \`batch_size\`? (set in ${join(dir, "common.yaml")}:2)`,
    );
  });
});
