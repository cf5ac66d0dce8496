import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEngine } from "../../src/engine/index.js";
import { openRunModel, parseRunModelRef, readRunFolder, readRunWeights } from "../../src/run-folder/index.js";
import { resolveRecordedPath } from "../../src/run-folder/weights.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { startServer } from "../../src/server/index.js";
import { modelInputFromTokens } from "../../src/wire/wire.js";
import { pigLatinOverrides, pigLatinRecipe, pigLatinRun, root, tempDir } from "../support/runs.js";
import { RunError } from "../../src/errors.js";

describe("RUN_DIR[:step]", () => {
  it("parses a trailing step, with or without step_, and keeps other colons in the folder", () => {
    expect(parseRunModelRef("runs/pig")).toEqual({ dir: "runs/pig" });
    expect(parseRunModelRef("runs/pig:12")).toEqual({ dir: "runs/pig", step: 12 });
    expect(parseRunModelRef("runs/pig:step_000012")).toEqual({ dir: "runs/pig", step: 12 });
    expect(parseRunModelRef("C:/runs/a:b")).toEqual({ dir: "C:/runs/a:b" });
    expect(() => parseRunModelRef(":3")).toThrow(RunError);
  });
});

describe("paths recorded in a run folder", () => {
  it("are used as they are when absolute or a service path, else from the run folder, else beside the recording file", async () => {
    const dir = await tempDir();
    await mkdir(join(dir, "checkpoints"));
    await writeFile(join(dir, "checkpoints", "only-beside.nxs"), "");
    await writeFile(join(dir, "at-root.nxs"), "");
    const beside = join(dir, "checkpoints");
    expect(await resolveRecordedPath("tinker://run-1/weights/7", dir, beside)).toBe("tinker://run-1/weights/7");
    expect(await resolveRecordedPath("/abs/file.nxs", dir, beside)).toBe("/abs/file.nxs");
    expect(await resolveRecordedPath("at-root.nxs", dir, beside)).toBe(join(dir, "at-root.nxs"));
    expect(await resolveRecordedPath("only-beside.nxs", dir, beside)).toBe(join(beside, "only-beside.nxs"));
    expect(await resolveRecordedPath("missing.nxs", dir, beside)).toBe(join(dir, "missing.nxs"));
  });
});

describe("a local run's weights", () => {
  it("are its checkpoints and sampler snapshots; the model samples exactly as the engine with those weights", async () => {
    const dir = await tempDir();
    const out = join(dir, "pig");
    const result = await pigLatinRun(out, { steps: 4, saveFreq: 2, validateFreq: 3 });
    expect(result.steps).toBe(4);
    const run = await readRunFolder(out);
    const weights = await readRunWeights(run);
    expect(weights.checkpoints.map((c) => [c.step, relative(out, c.trainingState)])).toEqual([
      [2, "checkpoints/step_000002.nxs"],
      [4, "checkpoints/step_000004.nxs"],
    ]);
    // pig latin samples nothing but validation (step 3); each checkpoint exports its step's weights for sampling too
    expect(weights.snapshots.map((s) => [s.step, relative(out, s.file)])).toEqual([
      [0, "sampler_weights/initial.nxw"],
      [2, "sampler_weights/step_000002.nxw"],
      [3, "sampler_weights/step_000003.nxw"],
      [4, "sampler_weights/step_000004.nxw"],
    ]);

    const model = await openRunModel(out);
    expect([model.name, model.step, model.backend, model.baseModel]).toEqual(["pig:4", 4, "local", "tiny"]);
    const engine = LocalEngine.create({ model: "tiny", outputDir: dir });
    await engine.loadState(join(out, "checkpoints/step_000004.nxs"), { optimizer: false });
    const prompt = model.tokenizer.encode("English: the dog\nPig Latin:", { addBos: true });
    const { sequences } = await (
      await model.samplingClient.sample(modelInputFromTokens(prompt), 1, { maxTokens: 12, temperature: 0 })
    ).result();
    const own = engine.sample(prompt, { maxTokens: 12, temperature: 0 });
    expect(sequences[0]!.tokens).toEqual(own.sequences[0]!.tokens);
    expect(sequences[0]!.logprobs).toEqual(own.sequences[0]!.logprobs);
    await model.close();

    // a step held only by a snapshot opens that snapshot; a missing step names the steps there are
    const atThree = await openRunModel(`${out}:3`);
    expect([atThree.name, relative(out, atThree.source)]).toEqual(["pig:3", "sampler_weights/step_000003.nxw"]);
    await expect(openRunModel(`${out}:1`)).rejects.toThrow(
      `${out} has no weights at step 1; it has weights at steps 0, 2, 3, 4`,
    );
  });

  it("still open after the folder moves when the run states record relative paths", async () => {
    const dir = await tempDir();
    const first = join(dir, "first");
    await pigLatinRun(first, { steps: 2, saveFreq: 2, validateFreq: 0 });
    const state = join(first, "checkpoints/step_000002.json");
    // As a run state written before nexrl recorded relative paths (and checksums) reads.
    const { checksum: _checksum, ...recorded } = JSON.parse(await readFile(state, "utf8"));
    recorded.trainingState = "checkpoints/step_000002.nxs";
    recorded.sampler.path = "sampler_weights/initial.nxw";
    recorded.initialSamplerPath = "sampler_weights/initial.nxw";
    await writeFile(state, JSON.stringify(recorded));
    const moved = join(dir, "moved");
    await rename(first, moved);
    const model = await openRunModel(moved);
    expect(model.source).toBe(join(moved, "checkpoints/step_000002.nxs"));
    const lp = await model.samplingClient.computeLogprobs(model.tokenizer.encode("ab", { addBos: true }));
    expect(lp).toHaveLength(3);
    expect(lp[1]).toEqual(expect.any(Number));
  });

  it("a fresh restart in the same folder hides the snapshots of the run it replaced", async () => {
    const dir = await tempDir();
    const out = join(dir, "pig");
    await pigLatinRun(out, { steps: 3, saveFreq: 0, validateFreq: 3 });
    await pigLatinRun(out, { steps: 1, saveFreq: 0, validateFreq: 1 });
    const weights = await readRunWeights(await readRunFolder(out));
    expect(weights.snapshots.map((s) => relative(out, s.file))).toEqual([
      "sampler_weights/initial-s1.nxw",
      "sampler_weights/step_000001-s1.nxw",
    ]);
  });
});

describe("openRunModel refuses", () => {
  it("what is not a run folder, a run without weights, and remote weights when asked for local ones", async () => {
    const dir = await tempDir();
    await expect(openRunModel(join(dir, "nope"))).rejects.toThrow(/there is no run folder at .*nope/);
    await expect(openRunModel(dir)).rejects.toThrow("is not a run folder: it holds no config.resolved.yaml");
    const empty = join(dir, "empty");
    await mkdir(empty);
    await writeFile(join(empty, "config.resolved.yaml"), "service: {train_service: {backend: local, model: tiny}}\n");
    await expect(openRunModel(empty)).rejects.toThrow(
      "holds no weights to sample: it has no checkpoint (a run saves one at its end unless trainer.save_final is false) and no sampler snapshot",
    );
    await writeFile(join(empty, "config.resolved.yaml"), "service: {train_service: {backend: tinker, model: m}}\n");
    await expect(openRunModel(empty, { localOnly: true })).rejects.toThrow(
      "trained on tinker: its weights are on that service",
    );
    await writeFile(join(empty, "config.resolved.yaml"), "experiment_name: x\n");
    await expect(openRunModel(empty)).rejects.toThrow("names no training backend and model");
  });
});

describe("a remote run's weights", () => {
  it("sample through the service: the checkpoint's sampler, or weights exported from its training state", async () => {
    const dir = await tempDir();
    const server = await startServer({ outputDir: join(dir, "server"), apiKey: "key-for-tests" });
    try {
      const out = join(dir, "remote");
      const overrides = [
        ...pigLatinOverrides({ steps: 2, saveFreq: 1, validateFreq: 2 }),
        "service.train_service.backend=tinker",
        `+service.tinker_service.base_url=${server.url}`,
        "+service.tinker_service.api_key=key-for-tests",
      ];
      await runRecipe(pigLatinRecipe, { outputDir: out, overrides, env: {}, cwd: root });
      const weights = await readRunWeights(await readRunFolder(out));
      expect(weights.snapshots).toEqual([]);
      // nothing samples at step 1, yet its checkpoint's sampler holds the weights of step 1
      expect(weights.checkpoints.map((c) => [c.step, c.samplerVersion, c.samplerPath.startsWith("tinker://")])).toEqual(
        [
          [1, 1, true],
          [2, 2, true],
        ],
      );
      const env = { TINKER_API_KEY: "key-for-tests" };
      const notes: string[] = [];
      const latest = await openRunModel(out, { env, log: (line) => notes.push(line) });
      expect([latest.name, latest.backend, latest.source]).toEqual([
        "remote:2",
        "tinker",
        weights.checkpoints[1]!.samplerPath,
      ]);
      // A checkpoint written before nexrl exported the weights of steps that sampled nothing records the initial sampler.
      const stepOne = join(out, "checkpoints", "step_000001.json");
      const { checksum: _checksum, ...stored } = JSON.parse(await readFile(stepOne, "utf8")) as {
        checksum: string;
        sampler: object;
        initialSamplerPath: string;
      };
      const initialSampler = stored.initialSamplerPath;
      await writeFile(stepOne, JSON.stringify({ ...stored, sampler: { path: initialSampler, version: 0 } }));
      const first = await openRunModel(`${out}:1`, { env, log: (line) => notes.push(line) });
      expect(first.source).toMatch(/^tinker:\/\/.*sample-step_000001-/);
      expect(notes).toEqual([
        "the checkpoint of step 1 recorded the sampler of step 0; exporting its own weights for sampling",
      ]);
      // the exported weights are neither the initial ones (the checkpoint's own sampler) nor those of step 2
      const tokens = latest.tokenizer.encode("English: a cat\nPig Latin:", { addBos: true });
      const { TinkerTrainingService } = await import("../../src/backends/index.js");
      const service = new TinkerTrainingService({ baseUrl: server.url, apiKey: "key-for-tests" });
      const initial = await service.createSamplingClient(initialSampler);
      const [lpInitial, lpStep1, lpStep2] = await Promise.all(
        [initial, first.samplingClient, latest.samplingClient].map((c) => c.computeLogprobs(tokens)),
      );
      const engine = LocalEngine.create({ model: "tiny", outputDir: dir, seed: 42 });
      // Tinker results carry logprobs as float32 (protobuf): equal to the engine's within float32 rounding
      const own = engine.computeLogprobs(tokens);
      expect(lpInitial!.map((lp) => lp === null)).toEqual(own.map((lp) => lp === null));
      lpInitial!.forEach((lp, i) => {
        if (lp !== null) expect(lp).toBeCloseTo(own[i]!, 5);
      });
      expect(lpStep1).not.toEqual(lpInitial);
      expect(lpStep1).not.toEqual(lpStep2);
      await service.close();
      await Promise.all([latest.close(), first.close()]);
      await expect(openRunModel(out, { env: {} })).rejects.toThrow(/TINKER_API_KEY/);
    } finally {
      await server.close();
    }
  });
});
