import { describe, expect, it } from "vitest";
import {
  adamParams,
  datum,
  modelInputFromTokens,
  modelInputLength,
  modelInputTokens,
  tensorData,
  tensorValues,
} from "../../src/wire/index.js";
import { adamParamsFromWire, adamParamsToWire } from "../../src/wire/wire.js";
import { InputError } from "../../src/errors.js";

describe("wire builders", () => {
  it("builds a datum in Tinker's JSON shape with SDK dtypes", () => {
    const d = datum([1, 2, 3], { target_tokens: [2, 3, 4], weights: [0, 1, 1] });
    expect(JSON.parse(JSON.stringify(d))).toEqual({
      model_input: { chunks: [{ type: "encoded_text", tokens: [1, 2, 3] }] },
      loss_fn_inputs: {
        target_tokens: { data: [2, 3, 4], dtype: "int64" },
        weights: { data: [0, 1, 1], dtype: "float32" },
      },
    });
  });

  it("accepts typed arrays and rejects values that cannot be sent", () => {
    expect(tensorData(new Float32Array([0.5, 1]), "float32")).toEqual({ data: [0.5, 1], dtype: "float32" });
    expect(() => tensorData([1, Number.NaN], "float32")).toThrow("tensor value at index 1 is NaN");
    expect(() => tensorData([1, 1.5], "int64")).toThrow(InputError);
  });

  it("measures model inputs, images by expected_tokens", () => {
    const input = modelInputFromTokens([5, 6]);
    input.chunks.push({ type: "image", data: "", format: "png", expected_tokens: 4 });
    expect(modelInputLength(input)).toBe(6);
    expect(() => modelInputTokens(input)).toThrow("a image chunk has no token ids");
    input.chunks.push({ type: "image_asset_pointer", location: "s3://x", format: "jpeg" });
    expect(() => modelInputLength(input)).toThrow("without expected_tokens");
  });

  it("expands CSR tensors", () => {
    expect(
      tensorValues({
        data: [7, 8, 9],
        dtype: "float32",
        shape: [2, 3],
        sparse_crow_indices: [0, 1, 3],
        sparse_col_indices: [2, 0, 1],
      }),
    ).toEqual([0, 0, 7, 8, 9, 0]);
  });

  it("fills AdamParams with Tinker's defaults and checks ranges", () => {
    expect(adamParams({ learningRate: 3e-4 })).toEqual({
      learningRate: 3e-4,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-12,
      weightDecay: 0,
      gradClipNorm: 0,
    });
    expect(() => adamParams({ beta2: 1 })).toThrow("AdamParams.beta2 must be in [0, 1), got 1");
    expect(() => adamParams({ gradClipNorm: -1 })).toThrow("0 disables clipping");
    expect(() => adamParams({ learningRate: Number.NaN })).toThrow("AdamParams.learningRate must be a finite number");
  });

  it("spells AdamParams in snake_case on the wire and back", () => {
    const params = adamParams({ learningRate: 3e-4, weightDecay: 0.01, gradClipNorm: 1, beta2: 0.99 });
    const wire = adamParamsToWire(params);
    expect(wire).toEqual({
      learning_rate: 3e-4,
      beta1: 0.9,
      beta2: 0.99,
      eps: 1e-12,
      weight_decay: 0.01,
      grad_clip_norm: 1,
    });
    expect(adamParamsFromWire(wire)).toEqual(params);
  });
});
