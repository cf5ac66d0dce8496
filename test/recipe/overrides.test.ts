import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadRecipe } from "../../src/recipe/index.js";
import { applyOverrides } from "../../src/recipe/overrides.js";
import type { RecipeFileContent } from "../../src/recipe/read.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

const content = (data: RecipeFileContent["data"]): RecipeFileContent => ({ data, origins: new Map() });
const apply = (data: RecipeFileContent["data"], ...overrides: string[]): RecipeFileContent => {
  const recipe = content(data);
  applyOverrides(recipe, overrides, "/r.yaml", {});
  return recipe;
};

describe("command-line overrides", () => {
  it("parses values as YAML scalars and flow collections", () => {
    const { data } = apply(
      { a: { b: 1 } },
      "a.b=10",
      "a.f=1e-4",
      "a.l=[1,2]",
      "a.m={x: 1}",
      "a.n=null",
      'a.s="10"',
      "a.e=",
      "a.t=true",
      "a.u=http://h:8/x",
    );
    expect(data).toEqual({
      a: { b: 10, f: 1e-4, l: [1, 2], m: { x: 1 }, n: null, s: "10", e: "", t: true, u: "http://h:8/x" },
    });
  });

  it("creates missing and null parents, sets list items, and records the override as the origin", () => {
    const recipe = apply({ service: null, l: [1, 2] }, "service.train_service.backend=local", "l[1]=5");
    expect(recipe.data).toEqual({ service: { train_service: { backend: "local" } }, l: [1, 5] });
    expect(recipe.origins.get("service.train_service.backend")).toBe(
      "command-line override `service.train_service.backend=local`",
    );
  });

  it("adds keys with +, refuses + on an existing key, and sets either way with ++", () => {
    expect(apply({ a: 1 }, "+b.c=2", "++a=3", "++d=4").data).toEqual({ a: 3, b: { c: 2 }, d: 4 });
    expect(() => apply({ a: 1 }, "+a=2")).toThrow(
      "a: `+` adds a new key, but this key already exists; drop the `+` to override it",
    );
  });

  it("reports every malformed or inapplicable override at once", () => {
    let error: unknown;
    try {
      apply({ a: 5, l: [1] }, "novalue", "a.b=1", "l[3]=1", "x=[1,");
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({
      issues: [
        {
          keyPath: "novalue",
          message: "malformed override; write `key.path=value` (or `+key.path=value` to add a key)",
        },
        { keyPath: "a.b", message: "cannot set `a.b`: the parent is number, not a map" },
        { keyPath: "l[3]", message: "cannot set `l[3]`: the list has 1 item" },
        { keyPath: "x", message: expect.stringMatching(/^cannot parse the value as YAML: Flow sequence/) },
      ],
    });
  });

  it("leaves unknown keys to the schema, which suggests the right one and names the override", async () => {
    const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": MINIMAL_YAML });
    const error = await recipeError(
      loadRecipe(join(dir, "r.yaml"), { overrides: ["trainer.total_train_step=10", "data.batch_size=0"] }),
    );
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "r.yaml")}:\n` +
        "  - data.batch_size: expected a number >= 1, got 0 (set in command-line override `data.batch_size=0`)\n" +
        "  - trainer.total_train_step: unknown key; did you mean `total_train_steps`? (set in command-line override `trainer.total_train_step=10`)",
    );
  });

  it("applies typed values that the schema accepts", async () => {
    const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": MINIMAL_YAML });
    const { config } = await loadRecipe(join(dir, "r.yaml"), {
      overrides: [
        "trainer.total_train_steps=10",
        "rollout_worker.temperature=0.7",
        "logger.backend=[console,jsonl]",
        "trainer.algorithm.learning_rate=2e-5",
      ],
    });
    expect(config.trainer.total_train_steps).toBe(10);
    expect(config.rollout_worker.temperature).toBe(0.7);
    expect(config.logger.backend).toEqual(["console", "jsonl"]);
    expect(config.trainer.algorithm.learning_rate).toBe(2e-5);
  });

  it("never shows a secret given on the command line", async () => {
    const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": MINIMAL_YAML });
    const error = await recipeError(
      loadRecipe(join(dir, "r.yaml"), { overrides: ["+service.tinker_service.api_key=[sk-live-123456]"] }),
    );
    expect(error.message).toContain(
      "service.tinker_service.api_key: expected a string, got *** (set in command-line override `+service.tinker_service.api_key=***`)",
    );
    expect(error.message).not.toContain("sk-live");
  });
});
