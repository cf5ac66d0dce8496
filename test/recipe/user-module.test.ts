import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { brandOf, isDerivedFrom, loadUserClass, NEXRL_BRAND } from "../../src/recipe/index.js";
import { FixtureBaseWorker } from "./fixtures/base-worker.js";
import { removeTempDirs, tempDir } from "../support/recipe.js";
import { RecipeError, type UserModuleFailure } from "../../src/errors.js";

afterAll(removeTempDirs);

const BASE = fileURLToPath(new URL("./fixtures/base-worker.ts", import.meta.url));
const BASE_COPY = fileURLToPath(new URL("./fixtures/base-worker-copy.ts", import.meta.url));
const KEY = "rollout_worker.custom_rollout_worker_module_path";

/** A temp ESM project holding `worker.ts` with `source`. */
async function project(source: string): Promise<string> {
  return tempDir({ "package.json": '{ "type": "module" }\n', "worker.ts": source });
}

/** Loads `MyWorker` from `worker.ts` in `dir`, expecting FixtureBaseWorker. */
function load(dir: string, exportName = "MyWorker") {
  return loadUserClass({
    modulePath: "worker.ts",
    exportName,
    expectedBase: FixtureBaseWorker,
    recipeDir: dir,
    cwd: dir,
    keyPath: KEY,
  });
}

/** Expects `load` to fail with `reason`; returns the single issue's message. */
async function failure(promise: Promise<unknown>, reason: UserModuleFailure): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(RecipeError);
  expect((error as RecipeError).moduleFailure).toBe(reason);
  expect((error as RecipeError).issues).toHaveLength(1);
  expect((error as RecipeError).issues[0]?.keyPath).toBe(KEY);
  return (error as RecipeError).issues[0]!.message;
}

describe("loadUserClass", () => {
  it("returns a class derived from another copy of the base, recognised by its brand", async () => {
    const dir = await project(
      `import { FixtureBaseWorker } from ${JSON.stringify(BASE)};\n` +
        "export class MyWorker extends FixtureBaseWorker {\n  rollout(task: string): string { return `${this.name}:${task}`; }\n}\n",
    );
    const Worker = await load(dir);
    expect(new Worker("w").rollout("t")).toBe("w:t");
    // tsx evaluated its own copy of the fixture: identity differs, only the brand matches.
    expect(Object.getPrototypeOf(Worker)).not.toBe(FixtureBaseWorker);
    expect(Worker.prototype instanceof FixtureBaseWorker).toBe(false);
  });

  it("accepts a class extending a separate copy of the base file, through intermediate classes", async () => {
    const dir = await project(
      `import { FixtureBaseWorker } from ${JSON.stringify(BASE_COPY)};\n` +
        "abstract class Middle extends FixtureBaseWorker {}\n" +
        "export default class extends Middle { rollout(): string { return 'ok'; } }\n",
    );
    const Worker = await load(dir, "default");
    expect(new Worker("w").rollout("t")).toBe("ok");
  });

  it("takes the default export of a .ts file that tsx compiles as CommonJS", async () => {
    const dir = await tempDir({
      "worker.ts": `import { FixtureBaseWorker } from ${JSON.stringify(BASE)};\nexport default class W extends FixtureBaseWorker { rollout(): string { return "cjs"; } }\nexport const n = 1;\n`,
    });
    const Worker = await load(dir, "default");
    expect(new Worker("w").rollout("t")).toBe("cjs");
    expect(await failure(load(dir, "X"), "missing_export")).toContain("its exports are `default`, `n`");
  });

  it("says where it looked when the file is missing", async () => {
    const dir = await tempDir();
    const cwd = await tempDir();
    const message = await failure(
      loadUserClass({
        modulePath: "nope/worker.ts",
        exportName: "W",
        expectedBase: FixtureBaseWorker,
        recipeDir: dir,
        cwd,
        keyPath: KEY,
      }),
      "not_found",
    );
    expect(message).toBe(
      `\`nope/worker.ts\` not found; tried ${join(dir, "nope/worker.ts")} (beside the recipe) and ${join(cwd, "nope/worker.ts")} (current directory); ` +
        "fix the path (relative paths start from the recipe's folder)",
    );
  });

  it("reports a compile error with its location", async () => {
    const dir = await project("export const x: number = ;\n");
    const message = await failure(load(dir), "import_failed");
    expect(message).toContain(
      `cannot import ${join(dir, "worker.ts")}: Transform failed with 1 error:\n${join(dir, "worker.ts")}:1:25: ERROR: Unexpected ";"`,
    );
  });

  it("reports an exception thrown on import with its source location (run as the CLI runs, outside vitest)", async () => {
    const dir = await project(
      "interface T { a: number }\nconst t: T = { a: 1 };\nif (t.a === 1) throw new Error('no config');\nexport class MyWorker {}\n",
    );
    // Vitest replaces V8's stack formatting, which drops tsx's source maps; a plain Node process keeps them.
    const script = join(dir, "load.mts");
    await writeFile(
      script,
      `import { loadUserClass } from ${JSON.stringify(fileURLToPath(new URL("../../src/recipe/user-module.ts", import.meta.url)))};\n` +
        `import { FixtureBaseWorker } from ${JSON.stringify(BASE)};\n` +
        `await loadUserClass({ modulePath: "worker.ts", exportName: "MyWorker", expectedBase: FixtureBaseWorker, recipeDir: ${JSON.stringify(dir)}, keyPath: "k" })\n` +
        "  .catch((error) => console.log(JSON.stringify({ reason: error.moduleFailure, message: error.issues[0].message })));\n",
    );
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", script]);
    expect(JSON.parse(stdout)).toEqual({
      reason: "import_failed",
      message: `cannot import ${join(dir, "worker.ts")}: no config (at ${join(dir, "worker.ts")}:3:22)`,
    });
    // Inside this process the location is still given, in generated-code coordinates.
    expect(await failure(load(dir), "import_failed")).toMatch(
      new RegExp(`^cannot import .*: no config \\(at ${join(dir, "worker.ts")}:\\d+:\\d+\\)$`),
    );
  });

  it("lists the exports it does have when the name is wrong", async () => {
    const dir = await project(
      `import { FixtureBaseWorker } from ${JSON.stringify(BASE)};\nexport class MyWorkr extends FixtureBaseWorker { rollout() { return ""; } }\nexport const helper = 1;\n`,
    );
    expect(await failure(load(dir), "missing_export")).toBe(
      `${join(dir, "worker.ts")} has no export \`MyWorker\`; its exports are \`MyWorkr\`, \`helper\`; did you mean \`MyWorkr\`?`,
    );
    const empty = await project("export {};\n");
    expect(await failure(load(empty), "missing_export")).toBe(
      `${join(empty, "worker.ts")} has no export \`MyWorker\`; it has no exports; export a class that extends FixtureBaseWorker`,
    );
  });

  it("refuses exports that are not classes", async () => {
    const dir = await project("export const MyWorker = () => 1;\nexport function Fn() {}\nexport const N = 42;\n");
    expect(await failure(load(dir), "not_a_class")).toBe(
      `\`MyWorker\` in ${join(dir, "worker.ts")} is a function, not a class; export \`class MyWorker extends FixtureBaseWorker\``,
    );
    expect(await failure(load(dir, "Fn"), "not_a_class")).toContain("is a function, not a class");
    expect(await failure(load(dir, "N"), "not_a_class")).toContain("is a number, not a class");
  });

  it("refuses a class that does not extend the base, even one with the same name", async () => {
    const dir = await project("class FixtureBaseWorker {}\nexport class MyWorker extends FixtureBaseWorker {}\n");
    expect(await failure(load(dir), "wrong_base")).toBe(
      `\`MyWorker\` in ${join(dir, "worker.ts")} does not extend FixtureBaseWorker (its chain: MyWorker → FixtureBaseWorker); ` +
        'declare it as `class MyWorker extends FixtureBaseWorker`, importing FixtureBaseWorker from "nexrl"',
    );
  });
});

describe("brands", () => {
  it("reads only a class's own brand and matches by identity or brand along the chain", () => {
    class Plain {}
    class Child extends Plain {}
    class Branded {
      static readonly [NEXRL_BRAND] = "nexrl.Branded";
    }
    class Copy {
      static readonly [NEXRL_BRAND] = "nexrl.Branded";
    }
    class Sub extends Copy {}
    expect(brandOf(Branded)).toBe("nexrl.Branded");
    expect(brandOf(Sub)).toBeUndefined();
    expect(isDerivedFrom(Child, Plain)).toBe(true);
    expect(isDerivedFrom(Plain, Child)).toBe(false);
    expect(isDerivedFrom(Sub, Branded)).toBe(true);
    expect(isDerivedFrom(Child, Branded)).toBe(false);
    expect(isDerivedFrom(class {}, Plain)).toBe(false);
    expect(isDerivedFrom(42, Plain)).toBe(false);
  });
});
