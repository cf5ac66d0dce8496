import { describe, expect, it } from "vitest";
import {
  discountedFutureSum,
  distillationAdvantages,
  klPenaltyAdvantages,
} from "../../src/algorithms/token-advantages.js";
import { groupAdvantages } from "../../src/algorithms/advantages.js";
import { passAtK } from "../../src/rollouts/validation.js";
import { Trajectory } from "../../src/contracts/trajectory.js";

const traj = (reward: number, groupId?: string, runId?: number) =>
  new Trajectory({
    tokens: [1, 2],
    lossMask: [0, 1],
    reward,
    ...(groupId !== undefined && { groupId }),
    ...(runId !== undefined && { runId }),
  });

describe("groupAdvantages", () => {
  it("gives rewards near ±1e308 their normalised advantages (σ² would overflow), and refuses those that overflow unnormalised", () => {
    const huge = groupAdvantages([
      traj(1e308, "a", 0),
      traj(-1e308, "a", 1),
      traj(1e308, "a", 2),
      traj(-1e308, "a", 3),
    ]);
    // ε (1e-6, in reward units) is negligible at this scale: exactly ±1
    expect(huge.advantages).toEqual([1, -1, 1, -1]);
    expect(huge).toMatchObject({ constantGroups: 0, groupStd: [1e308] });
    expect(() => groupAdvantages([traj(1e308, "g", 0), traj(-1e308, "g", 1)], { estimator: "dr_grpo" })).toThrow(
      "the advantages of group g overflow: its rewards (1e+308, -1e+308) give advantages beyond the ±3.4e38 of the 32-bit floats they are trained as",
    );
  });

  it("centres rewards within each group and divides by the population std (hand-computed)", () => {
    // group a: rewards 1, 0, 0, 1 → μ 0.5, σ 0.5 → ±1 (ε = 1e-6); group b: 0, 3 → μ 1.5, σ 1.5 → ∓1
    const batch = [
      traj(1, "a", 0),
      traj(0, "a", 1),
      traj(0, "a", 2),
      traj(1, "a", 3),
      traj(0, "b", 0),
      traj(3, "b", 1),
    ];
    const result = groupAdvantages(batch);
    const s = 1 / (0.5 + 1e-6);
    const t = 1.5 / (1.5 + 1e-6);
    expect(result.advantages).toEqual([0.5 * s, -0.5 * s, -0.5 * s, 0.5 * s, -t, t]);
    expect(result.advantages[0]).toBeCloseTo(0.999998, 6);
    expect(result).toMatchObject({
      groups: 2,
      constantGroups: 0,
      groupStd: [0.5, 1.5],
      constant: [false, false, false, false, false, false],
    });
  });

  it("gives 0 (not the raw reward) to a group of one and to constant groups, and counts them", () => {
    const batch = [
      traj(0.7, "single", 0),
      traj(1, "same", 0),
      traj(1, "same", 1),
      traj(0.4),
      traj(0, "x", 0),
      traj(2, "x", 1),
    ];
    const result = groupAdvantages(batch);
    expect(result.advantages.slice(0, 4)).toEqual([0, 0, 0, 0]);
    expect(result.constant).toEqual([true, true, true, true, false, false]);
    expect(result).toMatchObject({ groups: 4, constantGroups: 3 });
    expect(result.advantages.every(Number.isFinite)).toBe(true);
  });

  it("averages per run first, so a multi-trajectory run counts once, and never gives NaN for one run", () => {
    // run 0 has two trajectories (1 and 0: mean 0.5), run 1 one (0): μ = 0.25, σ = 0.25
    const batch = [traj(1, "g", 0), traj(0, "g", 0), traj(0, "g", 1)];
    const result = groupAdvantages(batch, { normalizeStd: false });
    expect(result.advantages).toEqual([0.75, -0.25, -0.25]);
    const oneRun = groupAdvantages([traj(1, "g", 0), traj(0, "g", 0)]);
    expect(oneRun.advantages).toEqual([0, 0]);
    expect(oneRun.constantGroups).toBe(1);
  });

  it("Dr.GRPO centres without dividing by the standard deviation", () => {
    const batch = [traj(1, "a", 0), traj(0, "a", 1), traj(0, "a", 2), traj(0, "a", 3)];
    expect(groupAdvantages(batch, { estimator: "dr_grpo" }).advantages).toEqual([0.75, -0.25, -0.25, -0.25]);
    expect(groupAdvantages(batch, { estimator: "dr_grpo", normalizeStd: true }).advantages).toEqual([
      0.75, -0.25, -0.25, -0.25,
    ]);
    const sigma = Math.sqrt(0.1875);
    expect(groupAdvantages(batch).advantages[0]).toBeCloseTo(0.75 / sigma, 5);
  });
});

describe("per-token advantage shaping", () => {
  it("discounts future sums", () => {
    expect(discountedFutureSum([1, 2, 4], 0.5)).toEqual([1 + 1 + 1, 2 + 2, 4]);
    expect(discountedFutureSum([1, 2], 0)).toEqual([1, 2]);
  });

  it("applies the KL penalty on trained tokens around the batch mean (hand-computed)", () => {
    // trajectory 1: trained tokens 1, 2 with d = q − b = 0.5 and 1.5; trajectory 2: token 2 with d = −1
    // mean d = (0.5 + 1.5 − 1) / 3 = 1/3
    const result = klPenaltyAdvantages(
      [
        { lossMask: [0, 1, 1], logprobs: [0, -1, -1], referenceLogprobs: [null, -1.5, -2.5], advantage: 1 },
        { lossMask: [0, 0, 1], logprobs: [0, -1, -2], referenceLogprobs: [null, -9, -1], advantage: -1 },
      ],
      0.3,
    );
    expect(result.meanKl).toBeCloseTo(1 / 3, 12);
    expect(result.advantages[0]![0]).toBe(0);
    expect(result.advantages[0]![1]).toBeCloseTo(1 + 0.3 * (1 / 3 - 0.5), 12);
    expect(result.advantages[0]![2]).toBeCloseTo(1 + 0.3 * (1 / 3 - 1.5), 12);
    expect(result.advantages[1]).toEqual([0, 0, expect.closeTo(-1 + 0.3 * (1 / 3 + 1), 12)]);
  });

  it("gives on-policy distillation advantages −coef·(student − teacher) on trained tokens, discounted", () => {
    const mask = [0, 1, 1, 0];
    const student = [0, -1, -2, -3];
    const teacher = [null, -0.5, -3, -1];
    const plain = distillationAdvantages(mask, student, teacher, 2);
    expect(plain.advantages).toEqual([0, 1, -2, 0]);
    expect(plain.reverseKl).toBeCloseTo((-0.5 + 1) / 2, 12);
    expect(plain.tokens).toBe(2);
    expect(distillationAdvantages(mask, student, teacher, 2, 0.5).advantages).toEqual([0, 1 - 1, -2, 0]);
  });

  it("computes unbiased pass@k", () => {
    expect(passAtK(4, 1, 1)).toBeCloseTo(0.25, 12);
    expect(passAtK(4, 1, 4)).toBe(1);
    expect(passAtK(4, 0, 2)).toBe(0);
    expect(passAtK(4, 2, 2)).toBeCloseTo(1 - 1 / 6, 12);
  });
});
