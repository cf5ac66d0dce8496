import { describe, expect, it } from "vitest";
import { JsonWriter } from "../../../../src/services/training/tinker/json-writer.js";
import { writeComputed, writeValues, writeWindow } from "../../../../src/services/training/tinker/number-json.js";
import { LazyValues } from "../../../../src/types/datum-view.js";

/** The array text `write` produces. */
function written(write: (out: JsonWriter) => void): string {
  const out = new JsonWriter();
  out.ascii("[");
  write(out);
  out.ascii("]");
  return Buffer.from(out.bytes()).toString("utf8");
}

/** Finite numbers whose JSON is hard to get right by hand. */
const AWKWARD = [
  0,
  -0,
  1,
  -1,
  0.1 + 0.2,
  Math.fround(0.1),
  Math.fround(-2.302585),
  5e-324,
  -1.5e-300,
  1e-7,
  1e21,
  1.7976931348623157e308,
  123456789012,
  2 ** 53 + 2,
  151_935,
];

describe("writeWindow", () => {
  it("writes the elements of any stretch of an array, across blocks, as JSON.stringify does", () => {
    const array = Array.from({ length: 2600 }, (_, i) => AWKWARD[i % AWKWARD.length]! * (i % 7 === 0 ? -1 : 1));
    for (const [from, to] of [
      [0, 1],
      [1, 2600],
      [0, 2599],
      [1023, 1025],
      [5, 2053],
      [2599, 2600],
      [7, 7],
    ] as const) {
      expect(written((out) => writeWindow(out, { array, start: 0 }, from, to))).toBe(
        JSON.stringify(array.slice(from, to)),
      );
    }
    expect(written((out) => writeWindow(out, { array, start: 3 }, 1, 1500))).toBe(JSON.stringify(array.slice(4, 1503)));
  });

  it("writes runs of one value, short and long, at either end and across blocks, as JSON.stringify does", () => {
    const runs: Array<[number, number]> = [
      [0, 16],
      [0.5, 15],
      [-0, 3],
      [0, 1100],
      [0.1 + 0.2, 17],
      [1, 1],
      [-1e-7, 2000],
      [2, 16],
    ];
    const array = runs.flatMap(([value, count]) => Array<number>(count).fill(value));
    for (const [from, to] of [
      [0, array.length],
      [1, array.length - 1],
      [16, 31],
      [20, 1200],
      [1140, 3168],
    ] as const) {
      expect(written((out) => writeWindow(out, { array, start: 0 }, from, to))).toBe(
        JSON.stringify(array.slice(from, to)),
      );
    }
  });
});

describe("writeComputed", () => {
  const cases: Record<string, (i: number) => number> = {
    "runs of one advantage over a mask": (i) => (i % 300 < 40 ? 0 : 0.8660254037844386),
    "short runs below the run length": (i) => (Math.floor(i / 5) % 2 === 0 ? 0 : -0.5),
    "distinct values": (i) => Math.fround(Math.log(i + 1.5)),
    "awkward values, some repeated": (i) => AWKWARD[Math.floor(i / 17) % AWKWARD.length]!,
    "zeros and negative zeros in one run": (i) => (i % 2 === 0 ? 0 : -0),
    "a run that crosses the block size": (i) => (i >= 1000 && i < 1100 ? 7 : i),
  };
  for (const [name, at] of Object.entries(cases)) {
    it(`writes ${name} as JSON.stringify does`, () => {
      for (const length of [1, 15, 16, 17, 1024, 1025, 3000]) {
        expect(written((out) => writeComputed(out, length, at))).toBe(
          JSON.stringify(Array.from({ length }, (_, i) => at(i))),
        );
      }
    });
  }

  it("writes nothing for no values", () => {
    expect(written((out) => writeComputed(out, 0, () => 1))).toBe("[]");
  });
});

describe("writeValues", () => {
  it("writes lazy values from their source without reading them", () => {
    const window = new LazyValues(3, { window: { array: [9, 1.5, -0, 2], start: 1 } });
    const computed = new LazyValues(20, { at: (i) => (i < 18 ? 0.25 : i) });
    expect(written((out) => writeValues(out, window))).toBe("[1.5,0,2]");
    expect(written((out) => writeValues(out, computed))).toBe(JSON.stringify(computed.read()));
    expect(window.unread).toBe(true);
  });
});
