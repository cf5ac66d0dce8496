/**
 * Checkpoints a user can use: a run leaves one of its last step by default, and an SFT run's
 * checkpoint points its sampler at the trained weights, not at the initial ones.
 */
import { readFile, readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { readRunState } from "../../src/outputs/checkpoint.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import { pigLatinRows, tempDir, writeJsonl, writeRecipe } from "../support/pipeline.js";

/** An SFT recipe (pig_latin rows, no sampling) of `steps` steps, with `extra` keys under `trainer:`. */
async function sftRecipe(dir: string, steps: number, trainer = "") {
  await writeJsonl(join(dir, "train.jsonl"), pigLatinRows(8));
  return writeRecipe(
    dir,
    `data: {data_files: [train.jsonl], prompt_key: input, batch_size: 4, max_prompt_length: 32}
rollout_worker: {type: pig_latin, max_response_length: 40, max_sequence_length: 80}
trainer: {type: remote_api_cross_entropy, total_train_steps: ${steps}${trainer}}
service: {train_service: {backend: local, model: tiny, config: {learning_rate: 0.01}}}
`,
  );
}

describe("the final checkpoint", () => {
  it("is saved at the end of a run with the default save_freq 0, its sampler holding the trained weights", async () => {
    const dir = await tempDir();
    const result = await runRecipe(await sftRecipe(dir, 3), { outputDir: join(dir, "out") });
    expect(result.stopReason).toBe("completed");
    expect(result.lastCheckpoint).toBe(join(dir, "out", "checkpoints", "step_000003.json"));
    expect((await readdir(join(dir, "out", "checkpoints"))).filter((f) => f.endsWith(".json"))).toEqual([
      "step_000003.json",
    ]);
    const state = await readRunState(result.lastCheckpoint!);
    expect(state.step).toBe(3);
    // An SFT run samples nothing during training: the checkpoint still names step 3's weights.
    expect(state.sampler.version).toBe(3);
    expect(basename(state.sampler.path)).toMatch(/^step_000003/);
    expect(basename(state.initialSamplerPath)).toMatch(/^initial/);
    const [trained, initial] = await Promise.all([readFile(state.sampler.path), readFile(state.initialSamplerPath)]);
    expect(trained.length).toBe(initial.length);
    expect(trained.equals(initial)).toBe(false);
    expect(result.outputs.sampleable).toBe(true);
    expect(result.outputs.exportFormat).toBe("both");
  });

  it("is not saved with trainer.save_final: false, and save_freq checkpoints still are", async () => {
    const dir = await tempDir();
    const none = await runRecipe(await sftRecipe(dir, 2, ", save_final: false"), { outputDir: join(dir, "none") });
    expect(none.lastCheckpoint).toBeUndefined();
    // An SFT run samples nothing, so without a checkpoint nexrl export has no weights either.
    expect(none.outputs.exportFormat).toBeUndefined();
    expect(await readdir(join(dir, "none", "checkpoints")).catch(() => [])).toEqual([]);
    await runRecipe(await sftRecipe(dir, 3, ", save_final: false, save_freq: 2"), {
      outputDir: join(dir, "every"),
    });
    // save_freq saves every 2nd step and the last one.
    expect((await readdir(join(dir, "every", "checkpoints"))).filter((f) => f.endsWith(".json"))).toEqual([
      "step_000002.json",
      "step_000003.json",
    ]);
    expect((await readRunState(join(dir, "every", "checkpoints", "step_000002.json"))).sampler.version).toBe(2);
  });

  it("is saved when the run is stopped, even with save_final: false", async () => {
    const dir = await tempDir();
    const controller = new AbortController();
    const result = await runRecipe(await sftRecipe(dir, 50, ", save_final: false"), {
      outputDir: join(dir, "out"),
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === "step" && event.step === 2) controller.abort();
      },
    });
    expect(result.stopReason).toBe("aborted");
    expect(result.steps).toBe(2);
    expect(result.lastCheckpoint).toBe(join(dir, "out", "checkpoints", "step_000002.json"));
    expect((await readRunState(result.lastCheckpoint!)).sampler.version).toBe(2);
  });
});
