/**
 * The layer guard: every import of `src/` points down the README's architecture table (its
 * input), and no modules import each other in a cycle.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { cycles, importGraph, type ImportEdge } from "./import-graph.js";

const root = path.resolve(import.meta.dirname, "../..");

/** The layers of the README's architecture table, bottom first: each row's names (`wire/`, `errors.ts`). */
function readmeLayers(): string[][] {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Architecture"));
  const table = section.slice(0, section.indexOf("\n\n", section.indexOf("|---|")));
  return table
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => [...line.split("|")[1]!.matchAll(/`([^`]+)`/g)].map((match) => match[1]!));
}

/** The row of `file` (relative to `src/`): the row naming it or its longest enclosing folder. */
function layerOf(layers: string[][], file: string): number {
  let best = -1;
  let bestLength = -1;
  layers.forEach((names, row) => {
    for (const name of names)
      if ((name === file || (name.endsWith("/") && file.startsWith(name))) && name.length > bestLength) {
        best = row;
        bestLength = name.length;
      }
  });
  if (best < 0) throw new Error(`src/${file} is in no row of the README's architecture table: add its folder there`);
  return best;
}

const show = (edge: ImportEdge): string => `${edge.from} -> ${edge.to}`;

describe("the layers of src/", () => {
  const layers = readmeLayers();
  const edges = importGraph(path.join(root, "src"));

  it("reads a table of the layers and every import of src/", () => {
    expect(layers.length).toBeGreaterThanOrEqual(15);
    expect(layers.slice(0, 2)).toEqual([["brand.ts"], ["errors.ts"]]);
    expect(layers.at(-1)).toEqual(["testing/"]);
    expect(edges.length).toBeGreaterThan(1000);
    // The parser sees static, dynamic and type-only imports alike.
    expect(edges).toContainEqual({ from: "builtins.ts", to: "agent/worker-class.ts", typeOnly: false, dynamic: true });
    expect(edges).toContainEqual({
      from: "workers/sft.ts",
      to: "inference/chat-formats/tool-calls-in-text.ts",
      typeOnly: false,
      dynamic: false,
    });
    expect(edges.some((edge) => edge.typeOnly)).toBe(true);
  });

  it("places every module in a row of the table", () => {
    for (const edge of edges) {
      layerOf(layers, edge.from);
      layerOf(layers, edge.to);
    }
  });

  it("has no import pointing up the table", () => {
    const upward = edges.filter((edge) => layerOf(layers, edge.to) > layerOf(layers, edge.from)).map(show);
    expect([...new Set(upward)].sort()).toEqual([]);
  });

  it("has no cycle of imports that load code", () => {
    expect(cycles(edges.filter((edge) => !edge.typeOnly)).map((files) => files.join(" "))).toEqual([]);
  });

  it("has no cycle of type-only imports either", () => {
    expect(
      cycles(edges)
        .map((files) => files.join(" "))
        .sort(),
    ).toEqual([]);
  });
});

describe("the import graph and its cycles", () => {
  const edge = (from: string, to: string, typeOnly = false): ImportEdge => ({ from, to, typeOnly, dynamic: false });

  it("finds each cycle once, as its sorted files, and no cycle in a chain", () => {
    const found = cycles([
      edge("a", "b"),
      edge("b", "c"),
      edge("c", "a"),
      edge("c", "d"),
      edge("d", "e"),
      edge("e", "d"),
    ]);
    expect(found.map((files) => files.join(" ")).sort()).toEqual(["a b c", "d e"]);
    expect(cycles([edge("a", "b"), edge("b", "c"), edge("a", "c")])).toEqual([]);
    // A module that imports itself is no cycle of two or more files.
    expect(cycles([edge("a", "a")])).toEqual([]);
  });
});
