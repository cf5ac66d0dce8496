import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "..");

describe("package", () => {
  it("imports itself by name from a folder inside the checkout (as user recipe modules do)", async () => {
    const code =
      'import { Trajectory } from "nexrl"; const t = new Trajectory({ tokens: [1], lossMask: [1], reward: 2 }); console.log(t.validate().reward);';
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code], {
      cwd: path.join(root, "recipe", "pig_latin"),
    });
    expect(stdout.trim()).toBe("2");
  });

  it("declares an ESM package with types, a bin and Node >= 20.18", async () => {
    const pkg = JSON.parse(await readFile(path.join(root, "package.json"), "utf8"));
    expect(pkg).toMatchObject({
      name: "nexrl",
      type: "module",
      engines: { node: ">=20.18" },
      bin: { nexrl: "dist/cli/main.js" },
    });
    expect(pkg.exports["."]).toEqual({
      import: { types: "./dist/index.d.ts", default: "./dist/index.js" },
      require: { types: "./dist/index.d.cts", default: "./dist/index.cjs" },
    });
    // The subpath entry points are ES modules with their own types; nothing else is reachable.
    const subpaths = {
      wire: "entries/wire",
      backends: "entries/backends",
      algorithms: "entries/algorithms",
      agent: "agent/index",
      runs: "entries/runs",
      errors: "entries/errors",
      engine: "engine/index",
      server: "server/index",
      testing: "testing/index",
    };
    for (const [subpath, file] of Object.entries(subpaths))
      expect(pkg.exports[`./${subpath}`]).toEqual({ types: `./dist/${file}.d.ts`, default: `./dist/${file}.js` });
    expect(Object.keys(pkg.exports)).toEqual([
      ".",
      ...Object.keys(subpaths).map((name) => `./${name}`),
      "./package.json",
    ]);
  });
});
