import { describe, expect, it } from "vitest";
import { trajectoryToDatum } from "../../../src/algorithms/datums.js";
import { estimateDatumBytes } from "../../../src/backends/tinker/chunks.js";
import { checkDatums, lossBody } from "../../../src/backends/tinker/loss-body.js";
import { type LossFunctionName } from "../../../src/contracts/losses.js";
import { validateLossInputs } from "../../../src/contracts/loss-validation.js";
import { Trajectory } from "../../../src/contracts/trajectory.js";
import { datum, type Datum } from "../../../src/wire/wire.js";
import { InputError } from "../../../src/errors.js";

const MODEL = "sess:train:0";

/** A datum as Tinker receives it (wire-protocols §1.4): without client-only inputs, every tensor with its shape. */
function onWire(d: Datum): Datum {
  const inputs = Object.entries(d.loss_fn_inputs).filter(([key]) => key !== "mask" && key !== "loss_mask");
  return {
    model_input: d.model_input,
    loss_fn_inputs: Object.fromEntries(inputs.map(([key, t]) => [key, { ...t, shape: t.shape ?? [t.data.length] }])),
  };
}

/** The documented body, built as plain objects and serialised by JSON.stringify. */
function documented(
  data: Datum[],
  lossFn: string,
  config: Record<string, number> | undefined,
  seq = 3,
  modelId = MODEL,
): string {
  return JSON.stringify({
    forward_backward_input: { data: data.map(onWire), loss_fn: lossFn, ...(config && { loss_fn_config: config }) },
    model_id: modelId,
    seq_id: seq,
  });
}

/** The body the client sends. */
function sent(data: Datum[], lossFn: LossFunctionName, config?: Record<string, number>, modelId = MODEL): string {
  return lossBody("forward_backward_input", checkDatums(data, lossFn, config), lossFn, config, modelId, 3);
}

/** A sampled trajectory: vocabulary-sized ids, float32 logprobs, a prompt of `prompt` tokens. */
function sampled(
  length: number,
  prompt: number,
  seed: number,
  fields: Partial<ConstructorParameters<typeof Trajectory>[0]> = {},
): Trajectory {
  let x = seed;
  const next = (): number => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const tokens = Array.from({ length }, () => Math.floor(next() * 151_936));
  const lossMask = tokens.map((_, j) => (j < prompt ? 0 : 1));
  const logprobs = tokens.map((_, j) => (j < prompt ? 0 : Math.fround(Math.log(next() + 1e-9))));
  return new Trajectory({
    tokens,
    lossMask,
    logprobs,
    reward: 1,
    advantage: 0.1 + 0.2,
    groupId: "g",
    runId: seed,
    ...fields,
  });
}

/** Two datums of one trajectory: one to send, one to read for the expected body. */
function twice(
  t: Trajectory,
  lossFn: LossFunctionName,
  backend: "tinker" | "weaver" = "tinker",
  reduction?: "sum" | "mean",
): [Datum, Datum] {
  const options = { lossFn, backend, ...(reduction && { reduction }) };
  return [trajectoryToDatum(t, options)!, trajectoryToDatum(t, options)!];
}

describe("tinker loss bodies", () => {
  it("are the documented JSON for datums of trajectories", () => {
    const perToken = sampled(2500, 300, 4);
    perToken.advantages = perToken.tokens.map((_, j) => (j % 400 < 30 ? 0 : Math.fround(Math.sin(j)) * 1e-3));
    const weighted = sampled(1030, 7, 5, { advantage: -0.8660254037844386, extraFields: { loss_weight: 0.25 } });
    const cases: Array<[string, Trajectory, LossFunctionName, "tinker" | "weaver", "sum" | "mean" | undefined]> = [
      ["a GRPO trajectory across several blocks", sampled(3000, 250, 1), "importance_sampling", "tinker", undefined],
      ["a trajectory of two tokens", sampled(2, 0, 2), "ppo", "tinker", undefined],
      ["per-token advantages", perToken, "cispo", "tinker", undefined],
      ["a loss weight and a negative advantage", weighted, "dro", "tinker", undefined],
      [
        "a datum built for Weaver (loss_mask is dropped)",
        sampled(40, 4, 6),
        "importance_sampling",
        "weaver",
        undefined,
      ],
      ["cross_entropy, sum", sampled(1500, 1200, 7), "cross_entropy", "tinker", "sum"],
      ["cross_entropy, mean", sampled(1500, 1200, 8), "cross_entropy", "tinker", "mean"],
    ];
    for (const [name, t, lossFn, backend, reduction] of cases) {
      const [send, expected] = twice(t, lossFn, backend, reduction);
      expect(sent([send], lossFn), name).toBe(documented([expected], lossFn, undefined));
    }
  });

  it("write many datums, plain ones and datums of trajectories, with the loss config and any model id", () => {
    const [a, aExpected] = twice(sampled(700, 70, 11), "ppo");
    const [b, bExpected] = twice(sampled(20, 2, 12), "ppo");
    const plain = datum([1, 2, 3], {
      target_tokens: [2, 3, 4],
      logprobs: [-0, -1e-7, -2.5],
      advantages: [0.5, 1e21, -5e-324],
    });
    const config = { clip_low_threshold: 0.8, clip_high_threshold: 1.2 };
    expect(sent([a, plain, b], "ppo", config, "modèle-λ")).toBe(
      documented([aExpected, plain, bExpected], "ppo", config, 3, "modèle-λ"),
    );
    expect(sent([plain], "ppo", {})).toBe(documented([plain], "ppo", {}));
  });

  it("write datums as they are when sent, arrays changed or replaced after they were built included", () => {
    const [d] = twice(sampled(50, 5, 13), "importance_sampling");
    d.loss_fn_inputs.logprobs!.data[3] = -0.125;
    d.loss_fn_inputs.advantages!.data = d.loss_fn_inputs.advantages!.data.map((a) => a * 2);
    d.loss_fn_inputs.target_tokens!.shape = [49];
    expect(sent([d], "importance_sampling")).toBe(documented([d], "importance_sampling", undefined));
    expect(
      JSON.parse(sent([d], "importance_sampling")).forward_backward_input.data[0].loss_fn_inputs.logprobs.data[3],
    ).toBe(-0.125);
  });

  it("write plain datums as JSON.stringify does, whatever their key order, shifted or not", () => {
    const shifted = datum([5, 6, 7, 8], { target_tokens: [6, 7, 8, 9], weights: [0, 1, 1, 0.5] });
    const unshifted = datum([5, 6, 7, 8], { target_tokens: [6, 7, 0, 9], weights: [1, 1, 1, 1] });
    const reordered: Datum = {
      model_input: { chunks: [{ tokens: [1, 2], type: "encoded_text" } as never] },
      loss_fn_inputs: {
        weights: { dtype: "float32", data: [1, -0] } as never,
        target_tokens: { data: [2, 3], dtype: "int64", shape: [2] },
      },
    };
    const long = datum(
      Array.from({ length: 3000 }, (_, i) => i),
      { target_tokens: Array.from({ length: 3000 }, (_, i) => i + 1), weights: Array(3000).fill(1) },
    );
    for (const d of [shifted, unshifted, reordered, long])
      expect(sent([d], "cross_entropy")).toBe(documented([d], "cross_entropy", undefined));
  });

  it("write plain datums with no positions and model inputs the contract does not check", () => {
    const empty = datum([], { target_tokens: [], weights: [] });
    expect(sent([empty], "cross_entropy")).toBe(documented([empty], "cross_entropy", undefined));
    const t = sampled(10, 2, 14);
    t.tokens[0] = Number.NaN;
    const [d, expected] = twice(t, "importance_sampling");
    expect(sent([d], "importance_sampling")).toBe(documented([expected], "importance_sampling", undefined));
    expect(sent([d], "importance_sampling")).toContain('"tokens":[null,');
  });

  it("reject a bad datum with the message validateLossInputs gives for it", () => {
    const bad: Array<[string, (t: Trajectory) => void, (d: Datum) => void, Record<string, number>?]> = [
      ["a NaN logprob", (t) => (t.logprobs![5] = Number.NaN), () => {}],
      ["an infinite advantage", (t) => (t.advantage = Number.POSITIVE_INFINITY), () => {}],
      ["a negative token id", (t) => (t.tokens[7] = -3), () => {}],
      ["a fractional token id", (t) => (t.tokens[9] = 2.5), () => {}],
      ["a changed dtype", () => {}, (d) => (d.loss_fn_inputs.logprobs!.dtype = "int64")],
      ["a missing input", () => {}, (d) => delete d.loss_fn_inputs.advantages],
      [
        "an input the loss does not take",
        () => {},
        (d) => (d.loss_fn_inputs.weights = { data: Array(19).fill(1), dtype: "float32" }),
      ],
      ["a config key the loss does not take", () => {}, () => {}, { beta: 1 }],
    ];
    for (const [name, spoilTrajectory, spoilDatum, config] of bad) {
      const t = sampled(20, 2, 15);
      spoilTrajectory(t);
      const [d, eager] = twice(t, "importance_sampling");
      spoilDatum(d);
      spoilDatum(eager);
      let expected: unknown;
      try {
        validateLossInputs("importance_sampling", onWire(eager), { backend: "tinker", ...(config && { config }) });
      } catch (error) {
        expected = error;
      }
      expect(expected, name).toBeInstanceOf(InputError);
      expect(() => checkDatums([d], "importance_sampling", config), name).toThrow(expected as Error);
    }
    expect(() => checkDatums([], "ppo", undefined)).toThrow(
      new InputError("ppo on tinker: no datums were given; pass at least one"),
    );
  });

  it("carry the Tinker SDK's size estimate of the datum as sent", () => {
    const [d, eager] = twice(sampled(300, 30, 16), "ppo", "weaver");
    const [checked] = checkDatums([d], "ppo", undefined);
    const { loss_mask: _, ...sentInputs } = eager.loss_fn_inputs;
    expect(checked!.bytes).toBe(estimateDatumBytes({ model_input: eager.model_input, loss_fn_inputs: sentInputs }));
    expect(checked!.bytes).toBe(10 * 299 * 4);
  });
});
