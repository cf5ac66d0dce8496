/**
 * Recipe fingerprints: what a worker's recipe must share with the driver's, and the message that
 * names every difference. No Redis server needed (the distributed tests run the check itself).
 */
import { createHash } from "node:crypto";
import { copyFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { publishedMismatch, runFingerprint } from "../../src/distributed/fingerprint.js";
import { encode } from "../../src/distributed/messages.js";
import { tokenizerName } from "../../src/run/preflight.js";
import { ConfigError } from "../../src/errors.js";
import { additionRows, fixture, grpoRecipeYaml, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

const { version } = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};
const KEY = "exp:fingerprint:s1";

/** The fingerprint of `yaml` (with `overrides`) in a folder of its own. */
async function fingerprintOf(yaml: string, overrides: string[] = []) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(4));
  const recipe = await writeRecipe(dir, yaml, overrides);
  return runFingerprint(recipe.config, recipe.dir, tokenizerName(recipe.config));
}

/** How a message shows a file's hash: its first 12 hex digits. */
async function shortHash(path: string): Promise<string> {
  return `${createHash("sha256")
    .update(await readFile(path))
    .digest("hex")
    .slice(0, 12)}…`;
}

describe("recipe fingerprints", () => {
  it("match for the same recipe, whatever the path of its worker module, and name every difference otherwise", async () => {
    const letter = fixture("letter-worker.ts");
    const driver = await fingerprintOf(grpoRecipeYaml());
    expect(driver).toEqual({
      nexrl: version,
      model: "tiny",
      tokenizer: "tiny",
      worker_type: "custom",
      modules: {
        "rollout_worker.custom_rollout_worker_module_path": {
          sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
          export: "LetterWorker",
        },
      },
    });
    const published = encode(driver);
    // Another machine's copy of the module: another path, the same content.
    const elsewhere = join(await tempDir(), "letter-worker.ts");
    await copyFile(letter, elsewhere);
    expect(publishedMismatch(await fingerprintOf(grpoRecipeYaml({ worker: elsewhere })), published, KEY, "exp")).toBe(
      undefined,
    );

    // The same class name in a module that was edited.
    await writeFile(elsewhere, `${await readFile(letter, "utf8")}\n// edited\n`);
    const edited = publishedMismatch(await fingerprintOf(grpoRecipeYaml({ worker: elsewhere })), published, KEY, "exp");
    expect(edited).toBeInstanceOf(ConfigError);
    expect(edited?.message).toBe(
      `this worker's recipe does not match the run's driver (stream prefix exp): worker class LetterWorker (module sha256 ${await shortHash(elsewhere)}) vs the driver's LetterWorker (module sha256 ${await shortHash(letter)}); start the worker with the driver's recipe`,
    );

    // Another class, model and tokenizer.
    const failing = fixture("failing-worker.ts");
    const other = await fingerprintOf(grpoRecipeYaml({ worker: failing, className: "FailingWorker" }), [
      "service.train_service.model=small",
      "rollout_worker.tokenizer=gpt2",
    ]);
    expect(publishedMismatch(other, published, KEY, "exp")?.message).toBe(
      `this worker's recipe does not match the run's driver (stream prefix exp): worker class FailingWorker (module sha256 ${await shortHash(failing)}) vs the driver's LetterWorker (module sha256 ${await shortHash(letter)}); model small vs the driver's tiny; tokenizer gpt2 vs the driver's tiny; start the worker with the driver's recipe`,
    );

    // A built-in worker against the driver's custom one.
    const simple = grpoRecipeYaml()
      .replace("type: custom", "type: simple")
      .replace(/ {2}custom_rollout_worker_(module_path|class_name): .*\n/g, "");
    expect(publishedMismatch(await fingerprintOf(simple), published, KEY, "exp")?.message).toBe(
      `this worker's recipe does not match the run's driver (stream prefix exp): worker type simple vs the driver's custom; worker class none vs the driver's LetterWorker (module sha256 ${await shortHash(letter)}); start the worker with the driver's recipe`,
    );
  });

  it("hashes the custom worker's options, whatever their key order, and name options that differ", async () => {
    const withOptions = (options: string): string =>
      grpoRecipeYaml().replace("  type: custom\n", `  type: custom\n  options: ${options}\n`);
    const driver = await fingerprintOf(withOptions("{ bonus: 0.5, words: { first: a, last: z } }"));
    expect(driver.worker_options).toMatch(/^[0-9a-f]{64}$/);
    const published = encode(driver);
    const reordered = await fingerprintOf(withOptions("{ words: { last: z, first: a }, bonus: 0.5 }"));
    expect(publishedMismatch(reordered, published, KEY, "exp")).toBeUndefined();
    const other = await fingerprintOf(withOptions("{ bonus: 0.25, words: { first: a, last: z } }"));
    const short = (hash: string | undefined): string => `sha256 ${hash!.slice(0, 12)}…`;
    expect(publishedMismatch(other, published, KEY, "exp")?.message).toBe(
      `this worker's recipe does not match the run's driver (stream prefix exp): rollout_worker.options ${short(other.worker_options)} vs the driver's ${short(driver.worker_options)}; start the worker with the driver's recipe`,
    );
    expect(publishedMismatch(await fingerprintOf(grpoRecipeYaml()), published, KEY, "exp")?.message).toContain(
      `rollout_worker.options none vs the driver's ${short(driver.worker_options)}`,
    );
  });

  it("names a driver of another nexrl version, and refuses a fingerprint it cannot read", () => {
    const own = { nexrl: version, model: "tiny", tokenizer: "tiny", worker_type: "simple", modules: {} };
    expect(publishedMismatch(own, encode({ ...own, nexrl: "9.9.9" }), KEY, "exp")?.message).toBe(
      `this worker's recipe does not match the run's driver (stream prefix exp): nexrl ${version} vs the driver's 9.9.9; start the worker with the driver's recipe and nexrl 9.9.9`,
    );
    // Keys a later nexrl adds are no difference.
    expect(publishedMismatch(own, encode({ ...own, later: true }), KEY, "exp")).toBeUndefined();
    const unreadable = publishedMismatch(own, encode({ ...own, model: 7 }), KEY, "exp");
    expect(unreadable).toBeInstanceOf(ConfigError);
    expect(unreadable?.message).toBe(
      `the run's driver published a recipe fingerprint (${KEY}) that nexrl ${version} cannot read (model: Invalid input: expected string, received number): start the worker with the driver's nexrl version and recipe`,
    );
    expect(publishedMismatch(own, "{not json", KEY, "exp")?.message).toContain("cannot read (its body is not JSON)");
  });
});
