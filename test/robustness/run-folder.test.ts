/** Issue 13, item 6: a run folder can be moved or copied and resumed; a copy uses its own files. */
import { cp, mkdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readRunState } from "../../src/outputs/checkpoint.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { RunEvent } from "../../src/outputs/events.js";
import { additionRows, grpoRecipeYaml, writeJsonl, writeRecipe } from "../support/pipeline.js";
import { tempDir } from "../support/user-project.js";

const losses = (metrics: ReadonlyArray<Record<string, unknown>>) => metrics.map((row) => [row.step, row["train/loss"]]);

describe("a run folder", () => {
  it("stores the paths inside it relative to it, resumes after a move and from a copy whose original is gone, and trains as an uninterrupted run", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
    const recipe = await writeRecipe(dir, grpoRecipeYaml({ steps: 4 }));
    const original = join(dir, "a", "run");
    await runRecipe(recipe.path, {
      outputDir: original,
      overrides: ["trainer.total_train_steps=2", "trainer.save_freq=1"],
    });

    const stored = await readFile(join(original, "checkpoints", "step_000002.json"), "utf8");
    expect(stored).not.toContain(original);
    expect(JSON.parse(stored)).toMatchObject({
      version: 2,
      runDir: "..",
      trainingState: "./checkpoints/step_000002.nxs",
      initialSamplerPath: "./sampler_weights/initial.nxw",
      sampler: { path: "./sampler_weights/step_000002.nxw", version: 2 },
    });
    expect(JSON.parse(await readFile(join(original, "run.json"), "utf8")).sessions).toHaveLength(1);

    const moved = join(dir, "b", "moved");
    await mkdir(join(dir, "b"));
    await rename(original, moved);
    expect((await readRunState(join(moved, "checkpoints", "step_000002.json"))).trainingState).toBe(
      join(moved, "checkpoints", "step_000002.nxs"),
    );
    const copy = join(dir, "c", "copy");
    await cp(moved, copy, { recursive: true });

    const warnings: string[] = [];
    const onEvent = (event: RunEvent) => void (event.type === "warning" && warnings.push(event.message));
    const afterMove = await runRecipe(recipe.path, {
      outputDir: moved,
      overrides: ["resume.mode=auto", "trainer.save_freq=1"],
      onEvent,
    });
    expect(afterMove).toMatchObject({ steps: 4, stopReason: "completed" });
    // The copy's original is gone: a copy that still pointed at it could not load its weights.
    await rm(moved, { recursive: true });
    const fromCopy = await runRecipe(recipe.path, { outputDir: copy, overrides: ["resume.mode=auto"], onEvent });
    expect(fromCopy).toMatchObject({ steps: 4, stopReason: "completed" });
    expect(warnings).toEqual([]);
    expect(JSON.parse(await readFile(join(copy, "run.json"), "utf8")).sessions[1]).toMatchObject({
      start: "resume",
      from: "./checkpoints/step_000002.json",
    });

    const uninterrupted = await runRecipe(recipe.path, { outputDir: join(dir, "whole") });
    expect(losses(afterMove.metrics)).toEqual(losses(uninterrupted.metrics));
    expect(losses(fromCopy.metrics)).toEqual(losses(uninterrupted.metrics));
  });
});
