import { describe, expect, it } from "vitest";
import { rolloutMetrics } from "../../src/pipeline/trainers/rollout-metrics.js";
import { trajectoryToDatum } from "../../src/pipeline/trainers/datums.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { tensorValues } from "../../src/types/wire.js";

const trajectory = (extraFields: Record<string, unknown>) =>
  new Trajectory({
    tokens: [1, 2, 3, 4],
    lossMask: [0, 0, 1, 1],
    reward: 1,
    logprobs: [0, 0, -0.5, -0.25],
    advantage: 2,
    extraFields,
  });

describe("agent episode weights and counters in the trainer", () => {
  it("scale a trajectory's advantages (policy losses) and weights (cross-entropy) by extraFields.loss_weight", () => {
    const policy = trajectoryToDatum(trajectory({ loss_weight: 0.25 }), {
      lossFn: "importance_sampling",
      backend: "local",
    })!;
    expect(tensorValues(policy.loss_fn_inputs.advantages!)).toEqual([0, 0.5, 0.5]);
    const supervised = trajectoryToDatum(trajectory({ loss_weight: 0.5 }), {
      lossFn: "cross_entropy",
      backend: "local",
      reduction: "mean",
    })!;
    expect(tensorValues(supervised.loss_fn_inputs.weights!)).toEqual([0, 0.25, 0.25]);
    const unweighted = trajectoryToDatum(trajectory({}), { lossFn: "importance_sampling", backend: "local" })!;
    expect(tensorValues(unweighted.loss_fn_inputs.advantages!)).toEqual([0, 2, 2]);
    expect(() => trajectoryToDatum(trajectory({ loss_weight: -1 }), { lossFn: "ppo", backend: "local" })).toThrow(
      /extraFields\.loss_weight -1; it must be a finite number >= 0/,
    );
  });

  it("sum extraFields.counters over the batch under their own names", () => {
    const metrics = rolloutMetrics([
      trajectory({ counters: { "agent/prefix_breaks": 2, "agent/episodes": 1 } }),
      trajectory({}),
      trajectory({ counters: { "agent/prefix_breaks": 1, "agent/episodes": 1, note: "x" } }),
    ]);
    expect(metrics).toMatchObject({ "agent/prefix_breaks": 3, "agent/episodes": 2 });
    expect(metrics.note).toBeUndefined();
  });
});
