import { describe, expect, it } from "vitest";
import { deriveSeed, seededRandom, seededShuffle } from "../../src/data/seed.js";

/** FNV-1a over the parts' text joined by U+001F, then the murmur3 finaliser: the definition of deriveSeed, restated. */
function byDefinition(...parts: Array<number | string>): number {
  const text = parts.map(String).join("\u001f");
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

describe("deriveSeed", () => {
  it("keeps the seeds of earlier versions, so that a resumed run draws what the original would", () => {
    // Values from the version that hashed the joined text (every run's data order and sampling seeds hang on them).
    expect(deriveSeed(0)).toBe(1693486945);
    expect(deriveSeed(7, "rollout", 0, 0, 12, 3)).toBe(3072551981);
    expect(deriveSeed(7, "val", 2, 1, 0, 0)).toBe(49302558);
    expect(deriveSeed(4294967295, 0)).toBe(2636718335);
    expect(deriveSeed(-5, "x")).toBe(1277664265);
    expect(deriveSeed(0.5, 1)).toBe(3974795959);
    expect(deriveSeed(Number.MAX_SAFE_INTEGER, -0)).toBe(2172105398);
    expect(deriveSeed(1e21, 2)).toBe(3999956198);
    expect(deriveSeed("", "")).toBe(3192004061);
  });

  it("equals its definition on integers of every size and sign, floats and strings", () => {
    const next = seededRandom(11);
    const values = (i: number): Array<number | string> => {
      const scale = [1, 10, 1000, 2 ** 31, 2 ** 32, 2 ** 53][i % 6]!;
      const integer = Math.floor(next() * scale) * (i % 7 === 0 ? -1 : 1);
      return [
        integer,
        i % 3 === 0 ? "rollout" : Math.floor(next() * 2 ** 32),
        i % 11 === 0 ? next() * 1e6 : Number.MAX_SAFE_INTEGER - i,
        i,
      ];
    };
    for (let i = 0; i < 5000; i++) {
      const parts = values(i);
      expect(deriveSeed(...parts), JSON.stringify(parts)).toBe(byDefinition(...parts));
    }
  });

  it("gives different seeds for different parts, including parts that would join to the same text", () => {
    expect(deriveSeed(1, 23)).not.toBe(deriveSeed(12, 3));
    expect(deriveSeed(7, "rollout", 0, 0, 12, 3)).not.toBe(deriveSeed(7, "rollout", 0, 0, 12, 4));
  });
});

describe("seededShuffle", () => {
  it("draws the same order from the same seed and leaves its input alone", () => {
    const items = Array.from({ length: 20 }, (_, i) => i);
    const a = seededShuffle(items, 5);
    expect(seededShuffle(items, 5)).toEqual(a);
    expect(a).not.toEqual(items);
    expect([...a].sort((x, y) => x - y)).toEqual(items);
    expect(items).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});
