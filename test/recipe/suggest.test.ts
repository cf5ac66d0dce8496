import { describe, expect, it } from "vitest";
import { didYouMean, editDistance } from "../../src/recipe/suggest.js";

describe("suggestions", () => {
  it("computes edit distances", () => {
    expect(editDistance("", "abc")).toBe(3);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("batchsize", "batch_size")).toBe(1);
  });

  it("suggests the closest candidate within a third of the length, or an underscore suffix match", () => {
    const keys = ["batch_size", "total_train_steps", "nexau_agent_config_path", "seed"];
    expect(didYouMean("total_train_step", keys)).toBe("total_train_steps");
    expect(didYouMean("Batch_Size", keys)).toBe("batch_size");
    expect(didYouMean("agent_config_path", keys)).toBe("nexau_agent_config_path");
    expect(didYouMean("sed", keys)).toBe("seed");
    expect(didYouMean("learning_rate", keys)).toBeUndefined();
    expect(didYouMean("x", [])).toBeUndefined();
  });
});
