/** The text of the stream messages: non-finite numbers and strings that look like their tags. */
import { describe, expect, it } from "vitest";
import { decode, encode } from "../../src/distributed/messages.js";

describe("distributed messages: encode and decode", () => {
  it("keeps non-finite numbers numbers", () => {
    const value = { logprobs: [0, -Infinity, -0.5], reward: NaN, bonus: Infinity };
    expect(decode(encode(value))).toEqual(value);
  });

  it("keeps a data string that starts like a tag a string, byte for byte", () => {
    const row = {
      answer: "\u0000number:12",
      other: "\u0000number:NaN",
      escaped: "\u0000string:x",
      bare: "\u0000",
      inner: "a\u0000number:3",
      list: ["\u0000number:-Infinity", 5],
    };
    const text = encode(row);
    expect(decode(text)).toEqual(row);
    // With a non-finite number beside them (the replacer's path) as well.
    const mixed = { ...row, reward: -Infinity };
    expect(decode(encode(mixed))).toEqual(mixed);
  });

  it("writes plain JSON when there is nothing to tag", () => {
    const value = { a: 1, b: ["x", null, true], c: { d: "e" } };
    expect(encode(value)).toBe(JSON.stringify(value));
  });
});
