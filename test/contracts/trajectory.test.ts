import { describe, expect, it } from "vitest";
import { Trajectory, type TrajectoryInit } from "../../src/contracts/trajectory.js";
import { InputError } from "../../src/errors.js";

const good: TrajectoryInit = { tokens: [1, 2, 3], lossMask: [0, 1, 1], reward: 0.5 };

function errorOf(init: Partial<TrajectoryInit> & Record<string, unknown>): InputError {
  try {
    new Trajectory({ ...good, ...init } as TrajectoryInit).validate();
  } catch (e) {
    if (e instanceof InputError) return e;
    throw e;
  }
  throw new Error("validate() accepted a bad trajectory");
}

describe("Trajectory", () => {
  it("is built from a plain object with defaults", () => {
    const t = new Trajectory({ ...good, extraFields: { response: "ay" }, groupId: "g1", runId: 2, policyVersion: 4 });
    expect(t.validate()).toBe(t);
    expect(t.isVal).toBe(false);
    expect(t.extraFields).toEqual({ response: "ay" });
    expect(t.numLossTokens).toBe(2);
    expect([t.groupId, t.runId, t.policyVersion]).toEqual(["g1", 2, 4]);
    expect(t.logprobs).toBeUndefined();
    expect(new Trajectory(good).extraFields).toEqual({});
  });

  it.each([
    ["tokens", { tokens: [] }, "tokens is empty"],
    ["tokens", { tokens: [1, 2.5, 3] }, "tokens [1] is 2.5; token ids are non-negative integers"],
    ["tokens", { tokens: [1, -1, 3] }, "tokens [1] is -1"],
    ["lossMask", { lossMask: [0, 1] }, "lossMask has length 2 but tokens has length 3"],
    ["lossMask", { lossMask: [0, 2, 1] }, "lossMask [1] is 2; mask values are 0 or 1"],
    ["reward", { reward: Number.NaN }, "reward is NaN"],
    ["reward", { reward: Number.POSITIVE_INFINITY }, "reward is Infinity"],
    ["logprobs", { logprobs: [0, -1] }, "logprobs has length 2 but tokens has length 3"],
    ["logprobs", { logprobs: [0, -1, Number.NaN] }, "logprobs [2] is NaN"],
    ["advantages", { advantages: [0, 1, 1, 1] }, "advantages has length 4 but tokens has length 3"],
    ["advantage", { advantage: Number.NaN }, "advantage is NaN"],
  ])("validate() names the bad field %s", (field, init, message) => {
    const err = errorOf(init);
    expect(err.field).toBe(field);
    expect(err.message).toContain(message);
    expect(err.name).toBe("InputError");
  });

  it("names the group and run in the message", () => {
    expect(errorOf({ reward: Number.NaN, groupId: "task-7", runId: 3 }).message).toBe(
      "Trajectory (group task-7, run 3): reward is NaN; it must be a finite number",
    );
  });
});

describe("Trajectory's typed fields", () => {
  const base = { tokens: [1, 2], lossMask: [0, 1], reward: 1 };
  const message = (fields: Record<string, unknown>): string => {
    try {
      new Trajectory({ ...base, ...fields } as never).validate();
    } catch (error) {
      return (error as Error).message;
    }
    return "valid";
  };

  it("are checked by validate(), naming the bad value by its type", () => {
    expect(message({ lossWeight: "1" })).toBe(
      'Trajectory: lossWeight is the string "1"; it must be a finite number >= 0 (or absent for 1)',
    );
    expect(message({ lossWeight: true })).toBe(
      "Trajectory: lossWeight is the boolean true; it must be a finite number >= 0 (or absent for 1)",
    );
    expect(message({ preference: null })).toBe('Trajectory: preference is null; it must be "chosen" or "rejected"');
    expect(message({ lossWeight: 1n })).toBe(
      "Trajectory: lossWeight is the bigint 1; it must be a finite number >= 0 (or absent for 1)",
    );
    expect(message({ preference: () => "chosen" })).toBe(
      'Trajectory: preference is a function; it must be "chosen" or "rejected"',
    );
    expect(message({ score: [1] })).toBe("Trajectory: score is an array; it must be an object of numbers by name");
    expect(message({ counters: { n: Number.POSITIVE_INFINITY } })).toBe(
      "Trajectory: counters.n is Infinity; it must be a finite number",
    );
    expect(message({ score: { ok: true, f1: 0.5 }, counters: { n: 2 }, lossWeight: 0, preference: "rejected" })).toBe(
      "valid",
    );
  });
});
