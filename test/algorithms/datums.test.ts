import { describe, expect, it } from "vitest";
import { lossKind, trajectoryToDatum } from "../../src/algorithms/datums.js";
import { validateLossInputs } from "../../src/contracts/loss-validation.js";
import { Trajectory } from "../../src/contracts/trajectory.js";
import { datum, modelInputTokens, tensorValues, type Datum } from "../../src/wire/wire.js";
import { InputError } from "../../src/errors.js";

const inputs = (d: Datum) => Object.fromEntries(Object.entries(d.loss_fn_inputs).map(([k, v]) => [k, tensorValues(v)]));

// tokens 10 11 | 12 13 14 (prompt of 2, response of 3)
const sft = () => new Trajectory({ tokens: [10, 11, 12, 13, 14], lossMask: [0, 0, 1, 1, 1], reward: 1 });
const rl = () =>
  new Trajectory({
    tokens: [10, 11, 12, 13, 14],
    lossMask: [0, 0, 1, 0, 1],
    logprobs: [0, 0, -0.1, -0.2, -0.3],
    reward: 1,
    advantage: 2,
  });

describe("trajectoryToDatum", () => {
  it("shifts by one for cross_entropy: inputs tokens[0..n-2], targets tokens[1..], weights = the shifted loss mask", () => {
    const d = trajectoryToDatum(sft(), { lossFn: "cross_entropy", backend: "local" })!;
    expect(modelInputTokens(d.model_input)).toEqual([10, 11, 12, 13]);
    expect(inputs(d)).toEqual({ target_tokens: [11, 12, 13, 14], weights: [0, 1, 1, 1] });
    expect(d.loss_fn_inputs.target_tokens!.dtype).toBe("int64");
    validateLossInputs("cross_entropy", d, { backend: "tinker" });
    const mean = trajectoryToDatum(sft(), { lossFn: "cross_entropy", backend: "local", reduction: "mean" })!;
    expect(inputs(mean).weights).toEqual([0, 1 / 3, 1 / 3, 1 / 3]);
  });

  it("aligns sampler logprobs with targets and puts advantages only on trained positions", () => {
    const d = trajectoryToDatum(rl(), { lossFn: "importance_sampling", backend: "tinker" })!;
    expect(inputs(d)).toEqual({
      target_tokens: [11, 12, 13, 14],
      logprobs: [0, -0.1, -0.2, -0.3],
      advantages: [0, 2, 0, 2],
    });
    validateLossInputs("importance_sampling", d, { backend: "tinker" });
    const perToken = rl();
    perToken.advantages = [9, 9, 0.5, 9, -0.5];
    expect(inputs(trajectoryToDatum(perToken, { lossFn: "ppo", backend: "local" })!).advantages).toEqual([
      0, 0.5, 0, -0.5,
    ]);
  });

  it("keeps loss_mask only for Weaver, which requires it, and strips it for Tinker and the local engine", () => {
    const weaver = trajectoryToDatum(rl(), { lossFn: "importance_sampling", backend: "weaver" })!;
    expect(inputs(weaver).loss_mask).toEqual([0, 1, 0, 1]);
    validateLossInputs("importance_sampling", weaver, { backend: "weaver" });
    for (const backend of ["tinker", "local"] as const)
      expect(trajectoryToDatum(rl(), { lossFn: "cispo", backend })!.loss_fn_inputs.loss_mask).toBeUndefined();
  });

  it("leaves out trajectories with no signal and names the trajectory when a policy input is missing", () => {
    const zero = rl();
    zero.advantage = 0;
    expect(trajectoryToDatum(zero, { lossFn: "importance_sampling", backend: "local" })).toBeUndefined();
    expect(
      trajectoryToDatum(new Trajectory({ tokens: [1, 2], lossMask: [1, 0], reward: 0 }), {
        lossFn: "cross_entropy",
        backend: "local",
      }),
    ).toBeUndefined();
    expect(
      trajectoryToDatum(new Trajectory({ tokens: [1], lossMask: [1], reward: 0 }), {
        lossFn: "cross_entropy",
        backend: "local",
      }),
    ).toBeUndefined();
    const noAdvantage = new Trajectory({
      tokens: [1, 2],
      lossMask: [0, 1],
      logprobs: [0, -1],
      reward: 1,
      groupId: "g",
      runId: 3,
    });
    expect(() => trajectoryToDatum(noAdvantage, { lossFn: "importance_sampling", backend: "local" })).toThrow(
      new InputError(
        "trajectory (group g, run 3) has neither advantage nor advantages; prepareTrajectories must set one for importance_sampling",
      ),
    );
    const noLogprobs = new Trajectory({ tokens: [1, 2], lossMask: [0, 1], reward: 1, advantage: 1 });
    expect(() => trajectoryToDatum(noLogprobs, { lossFn: "dro", backend: "local" })).toThrow(
      /has no logprobs, which dro needs/,
    );
  });

  it("copies the trajectory's arrays: changing the trajectory afterwards leaves the datum as it was", () => {
    const t = rl();
    const d = trajectoryToDatum(t, { lossFn: "importance_sampling", backend: "tinker" })!;
    t.tokens[1] = 99;
    t.logprobs![2] = -0.5;
    t.lossMask[3] = 1;
    expect(modelInputTokens(d.model_input)).toEqual([10, 11, 12, 13]);
    expect(inputs(d)).toEqual({
      target_tokens: [11, 12, 13, 14],
      logprobs: [0, -0.1, -0.2, -0.3],
      advantages: [0, 2, 0, 2],
    });
  });

  it("serialises as the datum of the same arrays built by datum()", () => {
    const weighted = rl();
    weighted.lossWeight = 0.5;
    const cases: Array<[Datum, Datum]> = [
      [
        trajectoryToDatum(sft(), { lossFn: "cross_entropy", backend: "tinker", reduction: "mean" })!,
        datum([10, 11, 12, 13], { target_tokens: [11, 12, 13, 14], weights: [0, 1 / 3, 1 / 3, 1 / 3] }),
      ],
      [
        trajectoryToDatum(weighted, { lossFn: "ppo", backend: "weaver" })!,
        datum([10, 11, 12, 13], {
          target_tokens: [11, 12, 13, 14],
          logprobs: [0, -0.1, -0.2, -0.3],
          advantages: [0, 1, 0, 1],
          loss_mask: [0, 1, 0, 1],
        }),
      ],
    ];
    for (const [built, plain] of cases) expect(JSON.stringify(built)).toBe(JSON.stringify(plain));
  });

  it("names the trajectory and the field when a per-token array does not match the tokens", () => {
    const short = rl();
    short.logprobs = [0, 0, -0.1];
    expect(() => trajectoryToDatum(short, { lossFn: "importance_sampling", backend: "tinker" })).toThrow(
      new InputError("trajectory (group ?, run ?) has 3 logprobs values for 5 tokens; there must be one per token"),
    );
    const mask = sft();
    mask.lossMask = [0, 1];
    expect(() => trajectoryToDatum(mask, { lossFn: "cross_entropy", backend: "local" })).toThrow(
      /has 2 lossMask values for 5 tokens/,
    );
    const typed = rl();
    typed.advantages = new Float64Array(5) as unknown as number[];
    expect(() => trajectoryToDatum(typed, { lossFn: "ppo", backend: "local" })).toThrow(
      /advantages must be an array, got \[object Float64Array\]/,
    );
  });

  it("classifies losses and refuses the halves of a custom loss", () => {
    expect(lossKind("cross_entropy")).toBe("supervised");
    expect(
      ["importance_sampling", "ppo", "cispo", "dro", "truncated_importance_sampling"].map((l) => lossKind(l as "ppo")),
    ).toEqual(["policy", "policy", "policy", "policy", "policy"]);
    expect(() => lossKind("surrogate")).toThrow(InputError);
  });
});
