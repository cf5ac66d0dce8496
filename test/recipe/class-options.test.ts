/**
 * classOptions: a class's recipe options through its Standard Schema — issue paths as recipe
 * keys, asynchronous schemas, outputs that are not objects.
 */
import { describe, expect, it } from "vitest";
import { classOptions } from "../../src/recipe/class-options.js";
import type { OptionsSchema } from "../../src/contracts/options.js";
import { RecipeError } from "../../src/errors.js";
import { failure } from "../support/http-server.js";

/** A Standard Schema that answers `result` (after a tick when `later`). */
function schemaAnswering(result: unknown, later = false): OptionsSchema {
  return {
    "~standard": {
      version: 1,
      vendor: "test",
      validate: () => (later ? Promise.resolve(result) : result) as never,
    },
  };
}

async function refusal(run: Promise<unknown>): Promise<RecipeError> {
  const error = await failure(run);
  expect(error).toBeInstanceOf(RecipeError);
  return error as RecipeError;
}

describe("classOptions", () => {
  it("names each issue by its recipe key, with index and segment paths, from an asynchronous schema too", async () => {
    const issues = [
      { message: "Expected a string", path: ["items", 2, { key: "name" }] },
      { message: "Required", path: [{ key: 0 }] },
      { message: "Not an object" },
    ];
    const error = await refusal(
      classOptions(
        { name: "Mine", optionsSchema: schemaAnswering({ issues }, true) },
        { items: [] },
        "trainer.options",
      ),
    );
    expect(error.file).toBeUndefined();
    expect(error.issues.map(({ keyPath, message }) => [keyPath, message])).toEqual([
      ["trainer.options.items[2].name", "Expected a string (checked by Mine.optionsSchema)"],
      ["trainer.options[0]", "Required (checked by Mine.optionsSchema)"],
      ["trainer.options", "Not an object (checked by Mine.optionsSchema)"],
    ]);
  });

  it("gives the schema's output, and refuses one that is not an object of options", async () => {
    expect(
      await classOptions(
        { name: "Mine", optionsSchema: schemaAnswering({ value: { filled: 1 } }) },
        undefined,
        "rollout_worker.options",
      ),
    ).toEqual({ filled: 1 });
    expect(await classOptions({ name: "Plain" }, undefined, "rollout_worker.options")).toEqual({});
    const array = await refusal(
      classOptions(
        { name: "Mine", optionsSchema: schemaAnswering({ value: [1] }) },
        {},
        "rollout_worker.options",
        "r.yaml",
      ),
    );
    expect(array.file).toBe("r.yaml");
    expect(array.issues[0]!.message).toBe(
      "Mine.optionsSchema gave an array, not an object of options: make the schema an object schema",
    );
    const nothing = await refusal(
      classOptions({ name: "Mine", optionsSchema: schemaAnswering({ value: null }) }, {}, "rollout_worker.options"),
    );
    expect(nothing.issues[0]!.message).toBe(
      "Mine.optionsSchema gave null, not an object of options: make the schema an object schema",
    );
  });
});
