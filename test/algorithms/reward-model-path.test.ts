/**
 * `rollout_worker.reward_model.sampler_path` is checked before a run's first rollout: on the local
 * engine by `nexrl validate`'s checks and `runRecipe`'s preflight (the weights file must load), on
 * a remote service when the run connects (the sampler must open); a good path runs.
 */
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import type { RecipeError } from "../../src/errors.js";
import type { RunEvent } from "../../src/outputs/events.js";
import { checkRecipe } from "../../src/run/preflight.js";
import { provideBuiltins } from "../../src/builtins.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { loadRecipe } from "../../src/recipe/index.js";
import { createTrainingService } from "../../src/backends/index.js";
import { LocalTrainingService } from "../../src/backends/local/index.js";
import { recipeError } from "../support/recipe.js";
import { serve } from "../support/training.js";
import { additionRows, tempDir, writeJsonl } from "../support/pipeline.js";

// checkRecipe is internal: plug in the agent service as the package root does.
provideBuiltins(() => import("../../src/index.js"));

const KEY = "rollout_worker.reward_model.sampler_path";

/** A one-step GRPO recipe whose math worker takes its rewards from the reward model at `samplerPath`. */
async function writeRewardModelRecipe(dir: string, samplerPath: string, service = "{backend: local, model: tiny}") {
  await writeJsonl(join(dir, "train.jsonl"), additionRows(4));
  const file = join(dir, "grpo_rm.yaml");
  await writeFile(
    file,
    [
      "data: {data_files: [train.jsonl], batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 40}",
      "rollout_worker:",
      "  type: single_turn_math",
      "  max_response_length: 6",
      "  agent: {math: {judge_mode: reward_model}}",
      `  reward_model: {sampler_path: ${JSON.stringify(samplerPath)}}`,
      "trajectory_pool: {batch_size: 4}",
      "trainer: {type: remote_api_grpo, total_train_steps: 1}",
      `service: {train_service: ${service}}`,
      "",
    ].join("\n"),
  );
  return file;
}

/** The one issue of a refused recipe, checked to name the sampler path key. */
function onlyIssue(error: RecipeError): string {
  expect(error.issues).toHaveLength(1);
  expect(error.issues[0]!.keyPath).toBe(KEY);
  return error.issues[0]!.message;
}

describe("rollout_worker.reward_model.sampler_path on the local engine", () => {
  it("is refused by nexrl validate's checks and by runRecipe before any rollout when the file does not load", async () => {
    const dir = await tempDir();
    const missing = join(dir, "rm", "step_000200.nxw");
    const recipe = await loadRecipe(await writeRewardModelRecipe(dir, missing), { env: {} });

    const validated = onlyIssue(await recipeError(checkRecipe(recipe, dir, {})));
    expect(validated).toContain(`cannot open "${missing}" as the reward model's sampler`);
    expect(validated).toContain("no such file");
    expect(validated).toMatch(/train the reward model first \(trainer\.type: remote_api_reward_model/);
    expect(validated).toContain("sampler_weights/step_*.nxw");

    // A file that is not engine weights: the engine's own reason.
    const notWeights = await loadRecipe(await writeRewardModelRecipe(dir, join(dir, "train.jsonl")), { env: {} });
    expect(onlyIssue(await recipeError(checkRecipe(notWeights, dir, {})))).toMatch(
      /not a nexrl engine state or snapshot file/,
    );

    // runRecipe: refused in its preflight, before the run folder, a rollout or a step.
    const events: RunEvent[] = [];
    const out = join(dir, "out");
    const error = await recipeError(runRecipe(recipe, { outputDir: out, env: {}, onEvent: (e) => events.push(e) }));
    expect(error.file).toBe(recipe.path);
    expect(onlyIssue(error)).toBe(validated);
    expect(String(error)).toContain(`${KEY}: the local training service cannot open "${missing}"`);
    expect(events.filter((e) => e.type !== "warning")).toEqual([]);
    expect(existsSync(out)).toBe(false);
  });

  it("accepts weights a training run saved, also as a path relative to where nexrl runs, and the run scores with them", async () => {
    const dir = await tempDir();
    const service = new LocalTrainingService({ outputDir: join(dir, "rm"), seed: 0 });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 3 });
    const saved = (await (await client.saveWeightsForSampler("rm")).result()).path;
    await service.close();
    expect(existsSync(saved)).toBe(true);

    const relativeToDir = await loadRecipe(await writeRewardModelRecipe(dir, relative(dir, saved)), { env: {} });
    const notes = await checkRecipe(relativeToDir, dir, {});
    expect(notes.some((n) => n.includes("reward_model"))).toBe(false);
    // The same relative path does not load from another folder: it resolves where nexrl runs.
    expect(onlyIssue(await recipeError(checkRecipe(relativeToDir, join(dir, "rm", "..", ".."), {})))).toContain(
      "no such file",
    );

    const out = join(dir, "out");
    const result = await runRecipe(await writeRewardModelRecipe(dir, saved), { outputDir: out, env: {} });
    expect(result).toMatchObject({ steps: 1, stopReason: "completed" });
    const samples = (await readFile(join(out, "samples.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { reward: number; extra_fields: { reward_model?: { score: number } } });
    expect(samples.length).toBeGreaterThan(0);
    for (const s of samples) {
      expect(s.extra_fields.reward_model?.score).toBe(s.reward);
      expect(s.reward).toBeLessThan(0); // a log-probability
    }
  });
});

describe("rollout_worker.reward_model.sampler_path on a remote service (nexrl serve, Tinker protocol)", () => {
  it("is opened when the run connects: a path the service does not know stops the run before any rollout; a saved one runs", async () => {
    const dir = await tempDir();
    const server = await serve({ apiKey: "key-for-tests", longPollTimeoutMs: 200 });
    const requests = server.requests;
    const tinker = `{backend: tinker, model: tiny}`;
    const overrides = [
      "+service.tinker_service.api_key=key-for-tests",
      `+service.tinker_service.base_url=${server.url}`,
    ];
    const unknown = "tinker://no-such-model/sampler_weights/rm";
    const bad = await loadRecipe(await writeRewardModelRecipe(dir, unknown, tinker), { env: {}, overrides });
    // nexrl validate cannot reach the service: it says when the path is checked.
    expect(await checkRecipe(bad, dir, {})).toContainEqual(
      `the reward model's sampler ${unknown} (${KEY}) is opened on tinker when the run connects, before any rollout`,
    );
    const error = await recipeError(runRecipe(bad, { outputDir: join(dir, "bad"), env: {} }));
    expect(onlyIssue(error)).toMatch(
      /^the tinker training service cannot open "tinker:\/\/no-such-model\/sampler_weights\/rm" as the reward model's sampler \(.+\); train the reward model first .* the tinker sampler path its saveWeightsForSampler returned$/,
    );
    const paths = requests.map((r) => r.path);
    expect(paths).toContain("/api/v1/create_sampling_session");
    expect(paths.filter((p) => /sample|forward/.test(p) && p !== "/api/v1/create_sampling_session")).toEqual([]);

    // Weights saved on the service open, and the run trains one step scored by them.
    const service = createTrainingService("tinker", { baseUrl: server.url, apiKey: "key-for-tests" });
    const client = await service.createTrainingClient({ baseModel: "tiny", seed: 3 });
    const saved = (await (await client.saveWeightsForSampler("rm")).result()).path;
    await service.close();
    expect(saved).toMatch(/^tinker:\/\//);
    const good = await loadRecipe(await writeRewardModelRecipe(dir, saved, tinker), { env: {}, overrides });
    const result = await runRecipe(good, { outputDir: join(dir, "good"), env: {} });
    expect(result).toMatchObject({ steps: 1, stopReason: "completed" });
    expect(result.metrics[0]!["rollout/reward_mean"]).toBeLessThan(0);
  });
});
