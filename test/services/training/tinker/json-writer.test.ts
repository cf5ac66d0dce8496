import { describe, expect, it } from "vitest";
import { JsonWriter } from "../../../../src/services/training/tinker/json-writer.js";

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString("utf8");

describe("JsonWriter", () => {
  it("writes ASCII, JSON in UTF-8, commas and repeats", () => {
    const out = new JsonWriter();
    out.ascii('{"id":');
    out.json("modèle λ 😀");
    out.ascii(',"a":[');
    out.repeat("0.5", 1);
    out.comma();
    out.repeat("-0.25", 3);
    out.ascii("]}");
    const bytes = out.bytes();
    expect(text(bytes)).toBe('{"id":"modèle λ 😀","a":[0.5,-0.25,-0.25,-0.25]}');
    expect(
      Buffer.compare(bytes, Buffer.from(JSON.stringify({ id: "modèle λ 😀", a: [0.5, -0.25, -0.25, -0.25] }))),
    ).toBe(0);
  });

  it("appends an array's elements without its brackets, keeping the byte before", () => {
    const out = new JsonWriter();
    out.ascii("[");
    out.elements("[1,2]");
    out.comma();
    out.elements("[3]");
    out.ascii("]");
    expect(text(out.bytes())).toBe("[1,2,3]");
  });

  it("appends again what it wrote, and grows past its first buffer", () => {
    const out = new JsonWriter();
    const long = JSON.stringify(Array.from({ length: 30_000 }, (_, i) => i));
    out.ascii("[");
    const start = out.position;
    out.elements(long);
    const end = out.position;
    out.comma();
    out.again(start, end);
    out.ascii("]");
    const bytes = out.bytes();
    expect(bytes.length).toBeGreaterThan(64 * 1024);
    expect(text(bytes)).toBe(`[${long.slice(1, -1)},${long.slice(1, -1)}]`);
  });

  it("hands out copies that later writes do not touch, and starts empty after each", () => {
    const out = new JsonWriter();
    out.ascii('{"a":1}');
    const first = out.bytes();
    expect(out.position).toBe(0);
    out.ascii('{"b":2}');
    out.clear();
    out.ascii('{"c":3}');
    expect(text(out.bytes())).toBe('{"c":3}');
    expect(text(first)).toBe('{"a":1}');
  });
});
