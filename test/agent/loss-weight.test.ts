import { describe, expect, it } from "vitest";
import { rolloutMetrics } from "../../src/algorithms/rollout-metrics.js";
import { trajectoryToDatum } from "../../src/algorithms/datums.js";
import { Trajectory, type TrajectoryInit } from "../../src/contracts/trajectory.js";
import { tensorValues } from "../../src/wire/wire.js";

const trajectory = (fields: Partial<TrajectoryInit>) =>
  new Trajectory({
    tokens: [1, 2, 3, 4],
    lossMask: [0, 0, 1, 1],
    reward: 1,
    logprobs: [0, 0, -0.5, -0.25],
    advantage: 2,
    ...fields,
  });

describe("agent episode weights and counters in the trainer", () => {
  it("scale a trajectory's advantages (policy losses) and weights (cross-entropy) by its lossWeight", () => {
    const policy = trajectoryToDatum(trajectory({ lossWeight: 0.25 }), {
      lossFn: "importance_sampling",
      backend: "local",
    })!;
    expect(tensorValues(policy.loss_fn_inputs.advantages!)).toEqual([0, 0.5, 0.5]);
    const supervised = trajectoryToDatum(trajectory({ lossWeight: 0.5 }), {
      lossFn: "cross_entropy",
      backend: "local",
      reduction: "mean",
    })!;
    expect(tensorValues(supervised.loss_fn_inputs.weights!)).toEqual([0, 0.25, 0.25]);
    const unweighted = trajectoryToDatum(trajectory({}), { lossFn: "importance_sampling", backend: "local" })!;
    expect(tensorValues(unweighted.loss_fn_inputs.advantages!)).toEqual([0, 2, 2]);
    // A trainer's prepareTrajectories may set one after the rollout was validated.
    const negative = trajectory({});
    negative.lossWeight = -1;
    expect(() => trajectoryToDatum(negative, { lossFn: "ppo", backend: "local" })).toThrow(
      "trajectory (group ?, run ?) has lossWeight -1; it must be a finite number >= 0 (or absent for 1)",
    );
    expect(() => trajectory({ lossWeight: Number.NaN }).validate()).toThrow(
      "Trajectory: lossWeight is NaN; it must be a finite number >= 0 (or absent for 1)",
    );
  });

  it("sum counters over the batch under their own names, and average scores as rollout/score/<key>_mean", () => {
    const metrics = rolloutMetrics([
      trajectory({ counters: { "agent/prefix_breaks": 2, "agent/episodes": 1 }, score: { exact: true, f1: 0.5 } }),
      trajectory({ score: { exact: false, f1: 0.25 } }),
      trajectory({ counters: { "agent/prefix_breaks": 1, "agent/episodes": 1 } }),
    ]);
    expect(metrics).toMatchObject({
      "agent/prefix_breaks": 3,
      "agent/episodes": 2,
      "rollout/score/exact_mean": 0.5,
      "rollout/score/f1_mean": 0.375,
    });
    expect(() => trajectory({ counters: { note: "x" as unknown as number } }).validate()).toThrow(
      'Trajectory: counters.note is the string "x"; it must be a finite number',
    );
  });

  it("read the extraFields keys earlier versions read (loss_weight, preference, score, counters) as the typed fields", () => {
    const legacy = trajectory({
      extraFields: {
        loss_weight: 0.5,
        preference: "chosen",
        score: { f1: 0.5 },
        counters: { "agent/episodes": 1, note: "x" },
        answer: "42",
      },
    });
    expect(legacy).toMatchObject({
      lossWeight: 0.5,
      preference: "chosen",
      score: { f1: 0.5 },
      counters: { "agent/episodes": 1 },
    });
    // What was the worker's own stays: a counters map with a non-number in it (as samples.jsonl showed it), the answer.
    expect(legacy.extraFields).toEqual({ counters: { "agent/episodes": 1, note: "x" }, answer: "42" });
    expect(rolloutMetrics([legacy])).toMatchObject({ "agent/episodes": 1, "rollout/score/f1_mean": 0.5 });
    expect(trajectoryToDatum(legacy, { lossFn: "cross_entropy", backend: "local" })!.loss_fn_inputs.weights).toEqual(
      trajectoryToDatum(trajectory({ lossWeight: 0.5 }), { lossFn: "cross_entropy", backend: "local" })!.loss_fn_inputs
        .weights,
    );
    // A preference that names no side was the worker's own too; typed fields given win.
    expect(trajectory({ extraFields: { preference: "blue" } })).toMatchObject({
      preference: undefined,
      extraFields: { preference: "blue" },
    });
    expect(trajectory({ lossWeight: 2, extraFields: { loss_weight: 0.5 } }).lossWeight).toBe(2);
  });
});
