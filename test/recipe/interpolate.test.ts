import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadRecipe } from "../../src/recipe/index.js";
import { interpolate } from "../../src/recipe/interpolate.js";
import type { PlainMap } from "../../src/recipe/tree.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

const resolve = (data: PlainMap, env: Record<string, string | undefined> = {}): PlainMap =>
  interpolate(data, new Map(), env, "/r.yaml");
const failure = (data: PlainMap, env: Record<string, string | undefined> = {}): unknown => {
  try {
    resolve(data, env);
  } catch (error) {
    return error;
  }
  throw new Error("expected interpolation to fail");
};

describe("key references", () => {
  const data = { a: { n: 5, f: 0.5, yes: true, none: null, l: [1, 2], s: "text" } };

  it("keeps the referenced type when the whole string is one interpolation", () => {
    const out = resolve({
      ...data,
      n: "${a.n}",
      f: "${a.f}",
      yes: "${a.yes}",
      none: "${a.none}",
      l: "${a.l}",
      m: "${a}",
    });
    expect(out).toMatchObject({ n: 5, f: 0.5, yes: true, none: null, l: [1, 2], m: data.a });
    expect(out.m).not.toBe(data.a);
  });

  it("stringifies values embedded in a longer string", () => {
    const out = resolve({ ...data, e: "n=${a.n}, f=${a.f}, none=${a.none}, l=${a.l}, s=${a.s}" });
    expect(out.e).toBe("n=5, f=0.5, none=null, l=[1,2], s=text");
  });

  it("indexes lists with [i] or .i and resolves references recursively, inside referenced maps too", () => {
    const out = resolve({ ...data, x: "${y}", y: "${a.l[1]}", z: "${a.l.0}", m: { p: "${x}" }, q: "${m}" });
    expect(out).toMatchObject({ x: 2, y: 2, z: 1, m: { p: 2 }, q: { p: 2 } });
  });

  it("leaves escaped \\${…} as literal text", () => {
    expect(resolve({ a: 1, s: "cost: \\${a}", t: "${a} and \\${a}" })).toEqual({
      a: 1,
      s: "cost: ${a}",
      t: "1 and ${a}",
    });
  });

  it("names an unknown reference with a suggestion", () => {
    expect(failure({ data: { batch_size: 4 }, trainer: { n: "${data.batchsize}" } })).toMatchObject({
      issues: [
        {
          keyPath: "trainer.n",
          message:
            "`${data.batchsize}` refers to `data.batchsize`, which does not exist; did you mean `data.batch_size`?",
        },
      ],
    });
  });

  it("reports a cycle once, with the chain", () => {
    expect(failure({ a: "${b}", b: "x${c}", c: "${a}", d: "${a}" })).toMatchObject({
      issues: [{ keyPath: "a", message: "interpolation cycle: a → b → c → a" }],
    });
    expect(failure({ m: { x: "${m}" } })).toMatchObject({
      issues: [{ keyPath: "m.x", message: "interpolation cycle: m.x → m.x" }],
    });
  });

  it("rejects malformed and unterminated interpolations and unknown resolvers", () => {
    expect(failure({ a: "${a b}", b: "${x", c: "${oc.nope:X}" })).toMatchObject({
      issues: [
        { keyPath: "a", message: expect.stringMatching(/^invalid interpolation `\$\{a b\}`/) },
        { keyPath: "b", message: 'unterminated interpolation in "${x"; close it with `}`' },
        { keyPath: "c", message: "unknown resolver `oc.nope`; available: oc.env, oc.decode" },
      ],
    });
  });
});

describe("environment variables", () => {
  it("reads a variable as a string", () => {
    expect(resolve({ k: "${oc.env:STEPS}", u: "http://${oc.env:HOST}:80" }, { STEPS: "10", HOST: "h" })).toEqual({
      k: "10",
      u: "http://h:80",
    });
  });

  it("falls back to the default (a string, or null) only when the variable is unset", () => {
    const data = {
      a: "${oc.env:URL,https://x.dev/a}",
      b: "${oc.env:N,8080}",
      c: "${oc.env:N,null}",
      d: "${oc.env:N,'a,b'}",
      e: "${oc.env:N,${x}}",
      x: 7,
    };
    expect(resolve(data)).toEqual({ a: "https://x.dev/a", b: "8080", c: null, d: "a,b", e: "7", x: 7 });
    expect(resolve(data, { URL: "u", N: "" })).toEqual({ a: "u", b: "", c: "", d: "", e: "", x: 7 });
  });

  it("parses a string as YAML with oc.decode", () => {
    expect(resolve({ n: "${oc.decode:${oc.env:STEPS,10}}", l: "${oc.decode:${oc.env:L}}" }, { L: "[1, 2]" })).toEqual({
      n: 10,
      l: [1, 2],
    });
  });

  it("names the missing variable and the key path where it is used, once, with every other problem", async () => {
    const recipe = `${MINIMAL_YAML}  tinker_service:\n    api_key: \${oc.env:TINKER_API_KEY}\nexperiment_name: \${service.tinker_service.api_key}\nproject_name: \${nope}\n`;
    const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": recipe });
    const error = await recipeError(loadRecipe(join(dir, "r.yaml"), { env: {} }));
    expect(error.message).toBe(
      `Invalid recipe ${join(dir, "r.yaml")}:\n` +
        "  - service.tinker_service.api_key: environment variable TINKER_API_KEY is not set; export it, or give a default with " +
        `\`\${oc.env:TINKER_API_KEY,default}\` (set in ${join(dir, "r.yaml")}:13)\n` +
        `  - project_name: \`\${nope}\` refers to \`nope\`, which does not exist (set in ${join(dir, "r.yaml")}:15)`,
    );
  });

  it("resolves after overrides, so an override can change what a reference sees", async () => {
    const recipe = `${MINIMAL_YAML}experiment_name: run-\${trainer.total_train_steps}-\${oc.env:USER_TAG,none}\n`;
    const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": recipe });
    const { config } = await loadRecipe(join(dir, "r.yaml"), {
      overrides: ["trainer.total_train_steps=7"],
      env: { USER_TAG: "me" },
    });
    expect(config.experiment_name).toBe("run-7-me");
  });
});
