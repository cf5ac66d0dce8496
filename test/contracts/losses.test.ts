import { describe, expect, it } from "vitest";
import {
  LOSS_FUNCTION_NAMES,
  getLossFunction,
  lossFunctions,
  type BuiltinLossContract,
  type BuiltinLossName,
} from "../../src/contracts/losses.js";
import type { LossInputValues } from "../../src/wire/loss-math.js";
import { validateLossInputs } from "../../src/contracts/loss-validation.js";
import { datum } from "../../src/wire/wire.js";
import { InputError } from "../../src/errors.js";

const lp = [-0.5, -1.2, -2.0, -0.1];
const q = [-0.7, -1.0, -2.0, -0.4];
const adv = [1, -1, 0.5, 2];
const rl: LossInputValues = { target_tokens: [5, 6, 7, 8], logprobs: q, advantages: adv };

function finiteDifference(
  contract: BuiltinLossContract,
  x: number[],
  inputs: LossInputValues,
  config?: Record<string, number>,
): number[] {
  const h = 1e-6;
  return x.map((_, t) => {
    const plus = [...x];
    const minus = [...x];
    plus[t]! += h;
    minus[t]! -= h;
    return (contract.evaluate(plus, inputs, config).loss - contract.evaluate(minus, inputs, config).loss) / (2 * h);
  });
}

describe("lossFunctions formulas against hand-computed values", () => {
  it("cross_entropy is −Σ w·lp with gradient −w", () => {
    const out = lossFunctions.cross_entropy.evaluate(lp, { target_tokens: [1, 2, 3, 4], weights: [0, 1, 1, 0.5] });
    // −(0 + (−1.2) + (−2.0) + 0.5·(−0.1)) = 3.25
    expect(out.loss).toBeCloseTo(3.25, 12);
    expect(out.metrics["loss:sum"]).toBeCloseTo(3.25, 12);
    expect([...out.gradLogprobs]).toEqual([-0, -1, -1, -0.5]);
  });

  it("importance_sampling is −Σ r·A", () => {
    const r = lp.map((l, t) => Math.exp(l - q[t]!));
    const expected = -(r[0]! * 1 - r[1]! + r[2]! * 0.5 + r[3]! * 2);
    const out = lossFunctions.importance_sampling.evaluate(lp, rl);
    expect(out.loss).toBeCloseTo(expected, 12);
    // r = [e^0.2, e^-0.2, 1, e^0.3]
    expect(out.loss).toBeCloseTo(-(Math.exp(0.2) - Math.exp(-0.2) + 0.5 + 2 * Math.exp(0.3)), 12);
    expect(out.gradLogprobs[2]).toBeCloseTo(-0.5, 12);
  });

  it("ppo clips the ratio at 0.8/1.2 by default and takes the pessimistic term", () => {
    // ratios: e^0.2 = 1.2214 (A>0 → clipped to 1.2), e^-0.2 = 0.8187 (A<0, in range), 1, e^0.3 = 1.3499 (A>0 → 1.2)
    const out = lossFunctions.ppo.evaluate(lp, rl);
    const expected = -(1.2 * 1 + Math.exp(-0.2) * -1 + 1 * 0.5 + 1.2 * 2);
    expect(out.loss).toBeCloseTo(expected, 12);
    expect(out.gradLogprobs[0]).toBe(0); // clipped region: no gradient
    expect(out.gradLogprobs[3]).toBe(0);
    expect(out.gradLogprobs[1]).toBeCloseTo(Math.exp(-0.2), 12); // −r·A with A = −1
    expect(out.gradLogprobs[2]).toBeCloseTo(-0.5, 12);
  });

  it("ppo keeps the unclipped term when it is the minimum (negative advantage below the low clip)", () => {
    // r = e^-0.5 = 0.6065 < 0.8 with A = −1: unclipped −0.6065·(−1)=0.6065 vs clipped 0.8·(−1) = −0.8 → min is clipped
    // r = e^0.5 = 1.6487 > 1.2 with A = −1: unclipped −1.6487 vs clipped −1.2 → min is unclipped (gradient flows)
    const out = lossFunctions.ppo.evaluate([-1.5, -0.5], {
      target_tokens: [1, 1],
      logprobs: [-1, -1],
      advantages: [-1, -1],
    });
    expect(out.loss).toBeCloseTo(-(-0.8 + -Math.exp(0.5)), 12);
    expect(out.gradLogprobs[0]).toBe(0);
    expect(out.gradLogprobs[1]).toBeCloseTo(Math.exp(0.5), 12);
  });

  it("ppo honours configured thresholds", () => {
    const out = lossFunctions.ppo.evaluate(
      [0.5],
      { target_tokens: [1], logprobs: [0], advantages: [1] },
      { clip_low_threshold: 0.5, clip_high_threshold: 2 },
    );
    expect(out.loss).toBeCloseTo(-Math.exp(0.5), 12); // 1.6487 < 2: not clipped
    expect(out.gradLogprobs[0]).toBeCloseTo(-Math.exp(0.5), 12);
  });

  it("cispo weights lp·A by the clipped ratio (0..4 by default)", () => {
    const out = lossFunctions.cispo.evaluate([0, -3], {
      target_tokens: [1, 1],
      logprobs: [-2, -1],
      advantages: [1, 2],
    });
    // t0: r = e^2 = 7.389 → clipped 4; term −4·0·1 = 0, grad −4. t1: r = e^-2 = 0.1353; term −0.1353·(−3)·2, grad −0.1353·2
    expect(out.loss).toBeCloseTo(6 * Math.exp(-2), 12);
    expect(out.gradLogprobs[0]).toBeCloseTo(-4, 12);
    expect(out.gradLogprobs[1]).toBeCloseTo(-2 * Math.exp(-2), 12);
  });

  it("dro is −Σ[lp·A − ½β(lp − q)²] with β = 0.05 by default", () => {
    const out = lossFunctions.dro.evaluate(lp, rl);
    let expected = 0;
    lp.forEach((l, t) => (expected -= l * adv[t]! - 0.025 * (l - q[t]!) ** 2));
    expect(out.loss).toBeCloseTo(expected, 12);
    expect(out.gradLogprobs[0]).toBeCloseTo(-1 + 0.05 * 0.2, 12);
    const beta1 = lossFunctions.dro.evaluate([0], { target_tokens: [1], logprobs: [-2], advantages: [0] }, { beta: 1 });
    expect(beta1.loss).toBeCloseTo(2, 12);
    expect(beta1.gradLogprobs[0]).toBeCloseTo(2, 12);
  });
});

describe("lossFunctions gradients against finite differences", () => {
  const cases: Array<[BuiltinLossName, LossInputValues, Record<string, number>?]> = [
    ["cross_entropy", { target_tokens: [1, 2, 3, 4], weights: [0, 1, 0.3, -2] }],
    ["importance_sampling", rl],
    ["ppo", rl],
    ["ppo", { ...rl, advantages: [-1, -1, -1, -1] }],
    ["cispo", rl, { clip_low_threshold: 0.9, clip_high_threshold: 1.1 }],
    ["dro", rl, { beta: 0.3 }],
  ];
  for (const [name, inputs, config] of cases) {
    it(`${name} ${config ? JSON.stringify(config) : ""}`, () => {
      const contract = lossFunctions[name];
      const analytic = [...contract.evaluate(lp, inputs, config).gradLogprobs];
      const numeric = finiteDifference(contract, lp, inputs, config);
      if (name === "cispo") {
        // CISPO stops the gradient through the ratio: the analytic gradient is the FD gradient of
        // the loss with the clipped ratio frozen, and differs from the FD of the full loss where
        // the ratio is inside the clip range.
        const frozen = lp.map((l, t) => {
          const w = Math.min(Math.max(Math.exp(l - q[t]!), 0.9), 1.1);
          return -w * adv[t]!;
        });
        expect(analytic).toEqual(frozen.map((v) => expect.closeTo(v, 9)));
        const inRange = lp.findIndex((l, t) => Math.abs(l - q[t]!) < Math.log(1.1) && adv[t] !== 0 && l !== 0);
        expect(Math.abs(numeric[inRange]! - analytic[inRange]!)).toBeGreaterThan(1e-3);
        return;
      }
      analytic.forEach((g, t) => expect(g).toBeCloseTo(numeric[t]!, 5));
    });
  }

  it("ppo gradient is exactly zero in the clipped region and matches FD there", () => {
    const inputs = { target_tokens: [1], logprobs: [0], advantages: [1] };
    const x = [0.5]; // r = 1.65 > 1.2 with A > 0 → clipped, flat
    expect(lossFunctions.ppo.evaluate(x, inputs).gradLogprobs[0]).toBe(0);
    expect(finiteDifference(lossFunctions.ppo, x, inputs)[0]).toBeCloseTo(0, 8);
  });
});

describe("loss contracts", () => {
  it("lists every built-in with inputs, dtypes and config defaults", () => {
    expect(LOSS_FUNCTION_NAMES).toEqual([
      "cross_entropy",
      "importance_sampling",
      "ppo",
      "cispo",
      "dro",
      "truncated_importance_sampling",
      "forward_logprob",
      "surrogate",
    ]);
    expect(lossFunctions.cross_entropy.inputs).toMatchObject({
      target_tokens: { dtype: "int64" },
      weights: { dtype: "float32" },
    });
    expect(Object.keys(lossFunctions.ppo.inputs)).toEqual(["target_tokens", "logprobs", "advantages"]);
    expect(lossFunctions.ppo.config).toEqual({ clip_low_threshold: 0.8, clip_high_threshold: 1.2 });
    expect(lossFunctions.cispo.config).toEqual({ clip_low_threshold: 0, clip_high_threshold: 4 });
    expect(lossFunctions.dro.config).toEqual({ beta: 0.05 });
    expect(lossFunctions.surrogate.serverDefined).toBe(true);
    expect(lossFunctions.truncated_importance_sampling.backends).toEqual(["weaver"]);
  });

  it("rejects unknown config keys and missing or short inputs", () => {
    expect(() => lossFunctions.ppo.evaluate(lp, rl, { clip_low: 0.5 })).toThrow(
      /"clip_low" is not used by ppo; known keys: clip_low_threshold, clip_high_threshold/,
    );
    expect(() => lossFunctions.importance_sampling.evaluate(lp, { target_tokens: [1, 2, 3, 4], logprobs: q })).toThrow(
      /needs loss input "advantages"/,
    );
    expect(() => lossFunctions.cross_entropy.evaluate(lp, { target_tokens: [1, 2, 3, 4], weights: [1] })).toThrow(
      /"weights" has length 1 but the datum has 4 positions/,
    );
    expect(() => getLossFunction("kl")).toThrow(InputError);
  });
});

describe("validateLossInputs", () => {
  const isDatum = datum([1, 2, 3], { target_tokens: [2, 3, 4], logprobs: [-1, -1, -1], advantages: [0, 1, 1] });

  it("accepts a well-formed datum", () => {
    expect(() => validateLossInputs("importance_sampling", isDatum, { backend: "tinker" })).not.toThrow();
    expect(() =>
      validateLossInputs("ppo", isDatum, { backend: "local", config: { clip_high_threshold: 1.3 } }),
    ).not.toThrow();
  });

  it("names a missing key with its dtype", () => {
    const d = datum([1, 2], { target_tokens: [2, 3] });
    expect(() => validateLossInputs("cross_entropy", d, { backend: "tinker" })).toThrow(
      'cross_entropy on tinker: missing loss input "weights" (float32:',
    );
  });

  it("names a wrong length", () => {
    const d = datum([1, 2, 3], { target_tokens: [2, 3, 4], weights: [1, 1] });
    expect(() => validateLossInputs("cross_entropy", d, { backend: "local" })).toThrow(
      'loss input "weights" has 2 values but the model input has 3 positions',
    );
  });

  it("rejects mask keys on Tinker and explains how to mask", () => {
    const d = datum([1, 2, 3], {
      target_tokens: [2, 3, 4],
      logprobs: [-1, -1, -1],
      advantages: [0, 1, 1],
      loss_mask: [0, 1, 1],
    });
    expect(() => validateLossInputs("importance_sampling", d, { backend: "tinker" })).toThrow(
      /loss input "loss_mask" is rejected by tinker, which accepts only target_tokens, logprobs, advantages; mask through zero advantages/,
    );
    expect(() => validateLossInputs("importance_sampling", d, { backend: "weaver" })).not.toThrow();
  });

  it("requires loss_mask for Weaver's importance_sampling", () => {
    expect(() => validateLossInputs("importance_sampling", isDatum, { backend: "weaver" })).toThrow(
      'importance_sampling on weaver: missing loss input "loss_mask"',
    );
  });

  it("rejects losses a backend does not offer, wrong dtypes, bad target ids and unknown config", () => {
    expect(() => validateLossInputs("ppo", isDatum, { backend: "weaver" })).toThrow(
      "this backend does not offer ppo; it is offered by tinker, local",
    );
    const wrongDtype = {
      ...isDatum,
      loss_fn_inputs: { ...isDatum.loss_fn_inputs, target_tokens: { data: [2, 3, 4], dtype: "float32" as const } },
    };
    expect(() => validateLossInputs("importance_sampling", wrongDtype, { backend: "tinker" })).toThrow(
      '"target_tokens" has dtype float32, expected int64',
    );
    const negative = datum([1, 2], { target_tokens: [-100, 3], weights: [0, 1] });
    expect(() => validateLossInputs("cross_entropy", negative, { backend: "tinker" })).toThrow(
      "target_tokens[0] is -100; expected a non-negative token id",
    );
    expect(() => validateLossInputs("cross_entropy", negative, { backend: "weaver" })).not.toThrow();
    // Set after datum(), which refuses such values itself.
    const fraction = datum([1, 2], { target_tokens: [2, 3], weights: [0, 1] });
    fraction.loss_fn_inputs.target_tokens!.data[1] = 3.5;
    expect(() => validateLossInputs("cross_entropy", fraction, { backend: "weaver" })).toThrow(
      "target_tokens[1] is 3.5; expected a non-negative token id or -100 (ignored)",
    );
    const infinite = datum([1, 2], { target_tokens: [2, 3], weights: [0, 1] });
    infinite.loss_fn_inputs.target_tokens!.data[1] = Number.POSITIVE_INFINITY;
    expect(() => validateLossInputs("cross_entropy", infinite, { backend: "tinker" })).toThrow(
      '"target_tokens"[1] is Infinity; values must be finite',
    );
    expect(() => validateLossInputs("ppo", isDatum, { backend: "tinker", config: { epsilon: 0.2 } })).toThrow(
      'loss_fn_config key "epsilon" is not used by ppo on tinker',
    );
  });

  it("reads CSR tensors when checking values", () => {
    const d = datum([1, 2, 3], { target_tokens: [2, 3, 4] });
    d.loss_fn_inputs.weights = {
      data: [1, Number.NaN],
      dtype: "float32",
      shape: [1, 3],
      sparse_crow_indices: [0, 2],
      sparse_col_indices: [1, 2],
    };
    expect(() => validateLossInputs("cross_entropy", d, { backend: "tinker" })).toThrow(
      '"weights"[2] is NaN; values must be finite',
    );
  });
});
