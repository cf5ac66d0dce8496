import { describe, expect, it } from "vitest";
import { LazyValues, TensorView, TokensView, tokenCount, valueCount } from "../../src/types/datum-view.js";

describe("LazyValues", () => {
  it("reads a window of an array, or a function of the index, on the first read only", () => {
    const source = [5, 6, 7, 8];
    const window = new LazyValues(3, { window: { array: source, start: 1 } });
    expect(window.unread).toBe(true);
    expect(window.size).toBe(3);
    source[1] = 60;
    const values = window.read();
    expect(values).toEqual([60, 7, 8]);
    expect(window.unread).toBe(false);
    source[2] = 70;
    expect(window.read()).toBe(values);
    expect(values).toEqual([60, 7, 8]);
    let calls = 0;
    const computed = new LazyValues(3, { at: (i) => (calls++, i * 0.5) });
    expect(computed.read()).toEqual([0, 0.5, 1]);
    computed.read();
    expect(calls).toBe(3);
  });

  it("takes a replacement array, whose length is then its size", () => {
    const values = new LazyValues(2, { at: () => 1 });
    values.replace([1, 2, 3]);
    expect(values.unread).toBe(false);
    expect(values.size).toBe(3);
    expect(values.read()).toEqual([1, 2, 3]);
  });
});

describe("TensorView and TokensView", () => {
  it("look like plain tensors and chunks to keys, JSON, spreads and equality", () => {
    const tensor = new TensorView(new LazyValues(2, { window: { array: [1, 2, 3], start: 1 } }), "int64");
    expect(Object.keys(tensor)).toEqual(["data", "dtype"]);
    expect(JSON.stringify(tensor)).toBe('{"data":[2,3],"dtype":"int64"}');
    expect({ ...tensor }).toEqual({ data: [2, 3], dtype: "int64" });
    expect(tensor).toEqual({ data: [2, 3], dtype: "int64" });
    const chunk = new TokensView(new LazyValues(2, { window: { array: [1, 2, 3], start: 0 } }));
    expect(Object.keys(chunk)).toEqual(["type", "tokens"]);
    expect(JSON.stringify(chunk)).toBe('{"type":"encoded_text","tokens":[1,2]}');
  });

  it("give the same array on every read, which may be changed in place or replaced", () => {
    const values = new LazyValues(2, { at: (i) => i });
    const tensor = new TensorView(values, "float32");
    tensor.data[0] = 9;
    expect(tensor.data).toEqual([9, 1]);
    tensor.data = [4];
    expect(tensor.data).toEqual([4]);
    expect(TensorView.valuesOf(tensor)).toBe(values);
    expect(() => delete (tensor as Partial<TensorView>).data).toThrow(TypeError);
  });

  it("are told from plain objects, and counted without being read", () => {
    const values = new LazyValues(3, { at: () => 0 });
    const tensor = new TensorView(values, "float32");
    const chunk = new TokensView(new LazyValues(4, { at: () => 1 }));
    expect(valueCount(tensor)).toBe(3);
    expect(tokenCount(chunk)).toBe(4);
    expect(values.unread).toBe(true);
    expect(TokensView.valuesOf(chunk)!.unread).toBe(true);
    expect(TensorView.valuesOf({ data: [1], dtype: "float32" })).toBeUndefined();
    expect(TokensView.valuesOf({ type: "encoded_text", tokens: [1] })).toBeUndefined();
    expect(valueCount({ data: [1, 2], dtype: "float32" })).toBe(2);
    expect(tokenCount({ type: "encoded_text", tokens: [1] })).toBe(1);
  });
});
