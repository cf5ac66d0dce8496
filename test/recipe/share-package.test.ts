import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isCommonJsFile } from "../../src/recipe/share-package.js";
import { removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

describe("isCommonJsFile", () => {
  it("follows Node: .cts/.mts by extension, .ts/.js by the nearest package.json's type", async () => {
    const cjs = await tempDir({ "package.json": '{ "name": "plain" }', "src/deep/w.ts": "", "w.mts": "", "w.cts": "" });
    const esm = await tempDir({ "package.json": '{ "type": "module" }', "w.ts": "", "w.cts": "", "w.js": "" });
    expect(isCommonJsFile(join(cjs, "src/deep/w.ts"))).toBe(true);
    expect(isCommonJsFile(join(cjs, "w.mts"))).toBe(false);
    expect(isCommonJsFile(join(esm, "w.ts"))).toBe(false);
    expect(isCommonJsFile(join(esm, "w.js"))).toBe(false);
    expect(isCommonJsFile(join(esm, "w.cts"))).toBe(true);
  });
});
