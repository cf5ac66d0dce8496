/**
 * A recipe cannot reach the objects of the process: `__proto__`, `constructor` and `prototype`
 * keys are refused wherever they stand (top level, nested, under `defaults:`, in a TS recipe, in a
 * command-line override), and loading such a recipe leaves `Object.prototype` as it was, so the
 * next valid recipe still loads.
 */
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { loadRecipe } from "../../src/recipe/index.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);
afterEach(() => {
  // Undo a pollution so that one failing case cannot spoil the others' evidence.
  delete (Object.prototype as Record<string, unknown>)["polluted"];
});

const JSON_WITH_PROTO =
  '{"data": {"data_files": ["train.jsonl"]}, "rollout_worker": {"type": "pig_latin"}, "trainer": {"type": "remote_api_sft", "__proto__": {"polluted": 1}}}';

const polluted = (): unknown => ({}) as Record<string, unknown> & { polluted?: unknown };

describe("keys that would change the objects of the process", () => {
  it.each([
    ["the top level", "__proto__:\n  polluted: yes\n", "__proto__"],
    ["a nested map", "trainer:\n  __proto__:\n    polluted: yes\n", "trainer.__proto__"],
    ["a map in a list", "data:\n  data_files: [{__proto__: {polluted: yes}}]\n", "data.data_files[0].__proto__"],
    ["constructor", "trainer:\n  constructor:\n    prototype:\n      polluted: yes\n", "trainer.constructor"],
  ])("in %s of a YAML file composed with defaults: refused, naming the key", async (_where, extra, keyPath) => {
    const dir = await tempDir({
      "base.yaml": MINIMAL_YAML,
      "train.jsonl": TRAIN_JSONL,
      "evil.yaml": `defaults: [base, _self_]\n${extra}`,
    });
    const error = await recipeError(loadRecipe(join(dir, "evil.yaml")));
    expect(error.issues.map((i) => i.keyPath)).toEqual([keyPath]);
    expect(error.message).toContain("would change the objects of the process");
    expect((polluted() as { polluted?: unknown }).polluted).toBeUndefined();
    // The process is unharmed: a valid recipe loads.
    await expect(loadRecipe(join(dir, "base.yaml"))).resolves.toBeDefined();
  });

  it("in a TS recipe module", async () => {
    const dir = await tempDir({
      "train.jsonl": TRAIN_JSONL,
      // JSON.parse makes `__proto__` an own key, as a recipe module built from parsed data would have it.
      "evil.ts": `export default JSON.parse('${JSON_WITH_PROTO}');\n`,
    });
    const error = await recipeError(loadRecipe(join(dir, "evil.ts")));
    expect(error.issues.map((i) => i.keyPath)).toEqual(["trainer.__proto__"]);
    expect((polluted() as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("in a command-line override, as a key path or inside the value", async () => {
    const dir = await tempDir({ "r.yaml": MINIMAL_YAML, "train.jsonl": TRAIN_JSONL });
    const byPath = await recipeError(loadRecipe(join(dir, "r.yaml"), { overrides: ["++__proto__.polluted=1"] }));
    expect(byPath.issues[0]).toMatchObject({ keyPath: "__proto__.polluted" });
    const inValue = await recipeError(
      loadRecipe(join(dir, "r.yaml"), { overrides: ["++trainer.extra={__proto__: {polluted: 1}}"] }),
    );
    expect(inValue.issues[0]).toMatchObject({ keyPath: "trainer.extra.__proto__" });
    expect((polluted() as { polluted?: unknown }).polluted).toBeUndefined();
  });
});
