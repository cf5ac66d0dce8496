import { describe, expect, it } from "vitest";
import { resolveRunDirectory } from "../../src/outputs/run-dir.js";
import { ConfigError } from "../../src/errors.js";

describe("resolveRunDirectory", () => {
  it("puts a tagged run in its own folder under the storage root", () => {
    expect(resolveRunDirectory({ tag: "v1", cwd: "/work", env: {} })).toBe("/work/runs/v1");
    expect(resolveRunDirectory({ tag: "v1", cwd: "/work", env: { NEXRL_STORAGE_PATH: "/data" } })).toBe("/data/v1");
    expect(resolveRunDirectory({ cwd: "/work", env: {}, now: new Date("2026-12-01T10:20:30Z") })).toBe(
      "/work/runs/20261201-102030",
    );
    expect(resolveRunDirectory({ tag: "", outputDir: "out", cwd: "/work" })).toBe("/work/out");
  });

  it.each(["", "  ", ".", "..", "../elsewhere", "a/b", "a\\b"])(
    "refuses the tag %j, which names no folder of its own (the runs root itself, or another place)",
    (tag) => {
      expect(() => resolveRunDirectory({ tag, cwd: "/work", env: {} })).toThrow(ConfigError);
      expect(() => resolveRunDirectory({ tag, cwd: "/work", env: {} })).toThrow(
        `the tag ${JSON.stringify(tag)} names no folder of its own under /work/runs: give a name such as v1`,
      );
    },
  );
});
