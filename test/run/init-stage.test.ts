/**
 * `init:` warm starts: a recipe that needs another one's weights runs it first, reuses that run
 * while its inputs are unchanged, runs it again when they change, and says so in its progress.
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RecipeError, RunError } from "../../src/errors.js";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { RunEvent } from "../../src/outputs/events.js";
import { pigLatinRows, tempDir, writeJsonl } from "../support/pipeline.js";

/** An SFT recipe of `steps` steps on `data`; `extra` lines are appended. */
const sft = (steps: number, data: string, extra = "") =>
  `data: {data_files: [${data}], prompt_key: input, batch_size: 4, max_prompt_length: 32}
rollout_worker: {type: pig_latin, max_response_length: 40, max_sequence_length: 80}
trainer: {type: remote_api_cross_entropy, total_train_steps: ${steps}}
service: {train_service: {backend: local, model: tiny, config: {learning_rate: 0.01}}}
${extra}`;

/** A folder with `warm.yaml` (4 steps on warm.jsonl) and `main.yaml` (2 steps on train.jsonl, init from warm.yaml). */
async function twoStages() {
  const dir = await tempDir();
  await writeJsonl(join(dir, "warm.jsonl"), pigLatinRows(8));
  await writeJsonl(join(dir, "train.jsonl"), pigLatinRows(4));
  await writeFile(join(dir, "warm.yaml"), sft(4, "warm.jsonl"));
  await writeFile(join(dir, "main.yaml"), sft(2, "train.jsonl", "init: {from_recipe: warm.yaml}\n"));
  const env = { NEXRL_STORAGE_PATH: join(dir, "store") };
  return { dir, env };
}

/** Runs main.yaml in `dir` into `out`, collecting its events and its progress text. */
async function runMain(dir: string, env: Record<string, string>, out: string) {
  const events: RunEvent[] = [];
  let text = "";
  const result = await runRecipe(join(dir, "main.yaml"), {
    outputDir: join(dir, out),
    env,
    cwd: dir,
    onEvent: (e) => events.push(e),
    progress: { write: (chunk: string) => void (text += chunk) },
  });
  return { result, events, text };
}

describe("init.from_recipe", () => {
  it("runs the warm-start recipe first, starts from its final checkpoint, and shows the stage", async () => {
    const { dir, env } = await twoStages();
    const { result, events, text } = await runMain(dir, env, "a");
    const init = result.init!;
    expect(init.reused).toBe(false);
    expect(init.recipe).toBe(join(dir, "warm.yaml"));
    expect(init.runDir).toMatch(new RegExp(`^${join(dir, "store", "init", "warm-")}[0-9a-f]{12}$`));
    expect(init.checkpoint).toBe(join(init.runDir!, "checkpoints", "step_000004.json"));
    const warmRows = (await readFile(join(init.runDir!, "metrics.jsonl"), "utf8")).trim().split("\n");
    expect(warmRows).toHaveLength(4);
    expect(events.filter((e) => e.type === "init").map((e) => e.type === "init" && e.phase)).toEqual(["start", "done"]);
    expect(events.find((e) => e.type === "start")).toMatchObject({ start: "warm_start", from: init.checkpoint });
    expect(result.metrics.map((r) => r.step)).toEqual([1, 2]);
    expect(text).toContain(
      `warm start (init.from_recipe): running ${join(dir, "warm.yaml")} first, into ${init.runDir}`,
    );
    expect(text).toContain(`warm start done: training from the weights of ${init.checkpoint}`);
    // The warm-start run's own steps are printed (4 of them), then the run's (2).
    expect(text).toMatch(/step 4\/4[\s\S]*warm start done[\s\S]*step 2\/2/);
  });

  it("reuses the warm-start run while its inputs are unchanged, and runs it again when its data or recipe change", async () => {
    const { dir, env } = await twoStages();
    const first = await runMain(dir, env, "a");
    const second = await runMain(dir, env, "b");
    expect(second.result.init).toEqual({ ...first.result.init, reused: true });
    expect(second.events.filter((e) => e.type === "init").map((e) => e.type === "init" && e.phase)).toEqual(["reused"]);
    expect(second.text).toContain(`reusing ${first.result.init!.runDir}`);
    // The same starting weights: the first step's loss is the same.
    expect(second.result.metrics[0]!["train/loss"]).toBeCloseTo(first.result.metrics[0]!["train/loss"]!, 6);

    await appendFile(join(dir, "warm.jsonl"), `${JSON.stringify({ input: "new row", output: "ew-nay ow-ray" })}\n`);
    const changedData = await runMain(dir, env, "c");
    expect(changedData.result.init!.reused).toBe(false);
    expect(changedData.result.init!.runDir).not.toBe(first.result.init!.runDir);

    await writeFile(join(dir, "warm.yaml"), sft(3, "warm.jsonl"));
    const changedRecipe = await runMain(dir, env, "d");
    expect(changedRecipe.result.init!.reused).toBe(false);
    expect(changedRecipe.result.init!.checkpoint).toMatch(/step_000003\.json$/);
    // Back to the first inputs: that run is still there and is reused.
    await writeFile(join(dir, "warm.yaml"), sft(4, "warm.jsonl"));
    await writeFile(
      join(dir, "warm.jsonl"),
      (await readFile(join(dir, "warm.jsonl"), "utf8")).split("\n").slice(0, 8).join("\n") + "\n",
    );
    expect((await runMain(dir, env, "e")).result.init).toEqual({ ...first.result.init, reused: true });
  });

  it("does not apply to a resumed run, and refuses a cycle and init with resume.mode: from_path", async () => {
    const { dir, env } = await twoStages();
    const first = await runMain(dir, env, "a");
    const resumed = await runRecipe(join(dir, "main.yaml"), {
      outputDir: join(dir, "a"),
      env,
      cwd: dir,
      overrides: ["resume.mode=auto", "trainer.total_train_steps=3"],
    });
    expect(resumed.init).toBeUndefined();
    expect(resumed.metrics.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(first.result.lastCheckpoint).toBe(join(dir, "a", "checkpoints", "step_000002.json"));

    await writeFile(join(dir, "warm.yaml"), sft(4, "warm.jsonl", "init: {from_recipe: main.yaml}\n"));
    await expect(runMain(dir, env, "cycle")).rejects.toThrow(
      new RunError(
        "init.from_recipe forms a cycle: main.yaml → warm.yaml → main.yaml; a warm-start recipe cannot start from itself",
        { code: "setup" },
      ),
    );
    await expect(
      runRecipe(join(dir, "main.yaml"), {
        env,
        cwd: dir,
        outputDir: join(dir, "x"),
        overrides: ["resume.mode=from_path", "resume.resume_path=a"],
      }),
    ).rejects.toThrow(RecipeError);
  });
});

describe("init.from_checkpoint", () => {
  it("starts from a checkpoint's weights, found beside the recipe", async () => {
    const { dir, env } = await twoStages();
    const warm = await runRecipe(join(dir, "warm.yaml"), { outputDir: join(dir, "warm-run"), env, cwd: dir });
    await writeFile(join(dir, "main.yaml"), sft(2, "train.jsonl", "init: {from_checkpoint: warm-run}\n"));
    const { result, events } = await runMain(dir, env, "a");
    expect(result.init).toEqual({ checkpoint: warm.lastCheckpoint });
    expect(events.find((e) => e.type === "start")).toMatchObject({ start: "warm_start", from: warm.lastCheckpoint });
    await writeFile(join(dir, "main.yaml"), sft(2, "train.jsonl", "init: {from_checkpoint: nowhere}\n"));
    await expect(runMain(dir, env, "b")).rejects.toThrow(RunError);
  });
});
