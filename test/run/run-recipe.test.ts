import { spawn } from "node:child_process";
import { readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import type { MetricsRow, RunEvent } from "../../src/outputs/events.js";
import {
  additionRows,
  fixture,
  grpoRecipeYaml,
  pigLatinRows,
  tempDir,
  writeJsonl,
  writeRecipe,
} from "../support/pipeline.js";
import { InputError, RecipeError, RunError } from "../../src/errors.js";

const readJsonl = async (path: string) =>
  (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
const withoutTimes = (rows: readonly Record<string, unknown>[]) =>
  rows.map((row) => Object.fromEntries(Object.entries(row).filter(([key]) => !key.startsWith("time/"))));

/** A folder with train/val data and the GRPO recipe of `grpoRecipeYaml`. */
async function grpoRun(options: Parameters<typeof grpoRecipeYaml>[0] = {}, overrides: string[] = []) {
  const dir = await tempDir();
  await writeJsonl(join(dir, "train.jsonl"), additionRows(6));
  await writeJsonl(join(dir, "val.jsonl"), additionRows(3));
  const recipe = await writeRecipe(dir, grpoRecipeYaml(options), overrides);
  return { dir, recipe };
}

const VALIDATION = `validate:
  validate_before_train: true
  data: {data_files: [val.jsonl], rollout_repeat_n: 2}
  eval: {validate_freq: 2}
`;

describe("runRecipe", () => {
  it("trains a GRPO recipe end to end and writes config, metrics, samples and checkpoints", async () => {
    const { dir, recipe } = await grpoRun({ steps: 3, extra: `${VALIDATION}\nlogger: {backend: [console]}\n` });
    const events: RunEvent[] = [];
    const result = await runRecipe(recipe, { outputDir: join(dir, "out"), onEvent: (e) => events.push(e) });
    expect(result).toMatchObject({
      outputDir: join(dir, "out"),
      steps: 3,
      stopReason: "completed",
      // save_freq 0: only the final checkpoint (trainer.save_final defaults to true)
      lastCheckpoint: join(dir, "out", "checkpoints", "step_000003.json"),
    });
    const rows = await readJsonl(join(dir, "out", "metrics.jsonl"));
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    expect(result.metrics).toEqual(rows);
    expect(Object.keys(rows[0]!).sort()).toEqual(
      [
        "step",
        "time/validation_s",
        "val/even/reward_mean",
        "val/failed",
        "val/num_samples",
        "val/odd/reward_mean",
        "val/pass@1",
        "val/pass@2",
        "val/response_len_mean",
        "val/reward_mean",
        "val/reward_std",
        "val/skipped",
        "val/unknown_token_ids",
        "tokens/prompt",
        "tokens/completion",
        "tokens/trained",
        "tokens/prompt_total",
        "tokens/completion_total",
        "tokens/trained_total",
      ].sort(),
    );
    expect(rows[0]!["val/num_samples"]).toBe(6);
    for (const row of rows.slice(1)) {
      for (const key of [
        "rollout/reward_mean",
        "rollout/response_len_mean",
        "train/loss",
        "train/num_tokens",
        "time/step_s",
        "time/rollout_s",
        "time/train_s",
        "staleness/dropped",
        "train/groups",
      ]) {
        expect(row[key], `${key} at step ${row.step}`).toEqual(expect.any(Number));
      }
      expect(row["rollout/num_trajectories"]).toBe(8);
      expect(row["staleness/max"]).toBe(0);
    }
    expect(rows[2]!["val/reward_mean"]).toEqual(expect.any(Number));
    const samples = await readJsonl(join(dir, "out", "samples.jsonl"));
    expect(samples.filter((s) => s.step === 1)).toHaveLength(4);
    // sync mode: the rollouts of step k+1 were sampled by the weights of step k; validation at step k by those of step k
    for (const s of samples) expect(s.policy_version).toBe((s.step as number) - (s.validation ? 0 : 1));
    expect(samples[0]).toMatchObject({
      prompt: expect.stringContaining("What is"),
      response: expect.any(String),
      reward: expect.any(Number),
    });
    expect(await readFile(join(dir, "out", "config.resolved.yaml"), "utf8")).toContain("remote_api_grpo");
    expect(events.map((e) => e.type)).toEqual([
      "start",
      "validation",
      "step",
      "validation",
      "step",
      "step",
      "checkpoint",
      "end",
    ]);
    expect((await readdir(join(dir, "out", "sampler_weights"))).sort()).toEqual([
      "initial.nxw",
      "step_000001.nxw",
      "step_000002.nxw",
      "step_000003.nxw",
    ]);
  });

  it("stops after the step in flight when aborted, leaves a checkpoint, and resumes from it with resume.mode=auto", async () => {
    const { dir, recipe } = await grpoRun({ steps: 4 });
    const controller = new AbortController();
    const out = join(dir, "out");
    const first = await runRecipe(recipe, {
      outputDir: out,
      signal: controller.signal,
      onEvent: (e) => e.type === "step" && e.step === 2 && controller.abort(),
    });
    expect(first).toMatchObject({
      steps: 2,
      stopReason: "aborted",
      lastCheckpoint: join(out, "checkpoints", "step_000002.json"),
    });
    const state = JSON.parse(await readFile(first.lastCheckpoint!, "utf8"));
    expect(state).toMatchObject({
      format: "nexrl.run-state",
      step: 2,
      sampler: { version: 2 },
      data: { batches: 2 },
      model: { backend: "local", name: "tiny" },
    });
    // the sampler snapshot of the checkpoint has expired: the checkpoint's weights are exported again
    await rm(join(out, "sampler_weights", "step_000002.nxw"));
    const events: RunEvent[] = [];
    const resumed = await runRecipe(recipe.path, {
      outputDir: out,
      overrides: ["resume.mode=auto", "trainer.save_freq=1", "trainer.remove_previous_ckpt=true"],
      onEvent: (e) => events.push(e),
    });
    expect(resumed).toMatchObject({ steps: 4, stopReason: "completed" });
    expect(events[0]).toMatchObject({
      type: "warning",
      message: expect.stringMatching(
        /step_000002\.nxw of the checkpoint is gone; sampling from the checkpoint's weights instead$/,
      ),
    });
    expect(events[1]).toMatchObject({ type: "start", fromStep: 2, start: "resume", from: first.lastCheckpoint });
    expect((await readdir(join(out, "checkpoints"))).sort()).toEqual(["step_000004.json", "step_000004.nxs"]);
    expect(resumed.metrics.map((r) => r.step)).toEqual([1, 2, 3, 4]);
    expect(
      JSON.parse(await readFile(join(out, "run.json"), "utf8")).sessions.map((s: { start: string }) => s.start),
    ).toEqual(["fresh", "resume"]);
    // remove_previous_ckpt prunes the step snapshots no checkpoint needs (the resumed session's are named -s1)
    expect((await readdir(join(out, "sampler_weights"))).sort()).toEqual(["initial.nxw", "step_000004-s1.nxw"]);
  });

  it("continues a run killed with SIGKILL after step 3 and ends with the metrics of an uninterrupted run", async () => {
    const { dir, recipe } = await grpoRun({ steps: 5, extra: `${VALIDATION}\nresume: {mode: auto}\n` });
    const overrides = ["trainer.save_freq=2"];
    const killed = join(dir, "killed");
    const child = spawn(
      process.execPath,
      ["--import", "tsx", fixture("run-child.ts"), recipe.path, killed, "3", ...overrides],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    let errors = "";
    child.stderr.on("data", (chunk: Buffer) => (errors += chunk));
    const exit = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_, signal) => resolve(signal)));
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (chunk: Buffer) => {
          output += chunk;
          if (output.includes("blocked")) resolve();
        });
        child.on("exit", () => reject(new Error(`the child exited before step 3:\n${output}\n${errors}`)));
      });
      child.kill("SIGKILL");
      expect(await exit).toBe("SIGKILL");
    } finally {
      child.kill("SIGKILL");
    }
    expect(output.trim().split("\n")).toEqual(["step 1", "step 2", "checkpoint 2", "step 3", "blocked"]);
    expect((await readJsonl(join(killed, "metrics.jsonl"))).map((r) => r.step)).toEqual([0, 1, 2, 3]);
    const resumed = spawn(
      process.execPath,
      ["--import", "tsx", fixture("run-child.ts"), recipe.path, killed, "0", ...overrides],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let resumedOutput = "";
    resumed.stdout.on("data", (chunk: Buffer) => (resumedOutput += chunk));
    expect(await new Promise((resolve) => resumed.on("exit", resolve))).toBe(0);
    expect(resumedOutput.trim().split("\n")).toEqual([
      "step 3",
      "step 4",
      "checkpoint 4",
      "step 5",
      "checkpoint 5",
      "done",
    ]);
    const baseline = await runRecipe(recipe.path, { outputDir: join(dir, "baseline"), overrides });
    const killedRows = await readJsonl(join(killed, "metrics.jsonl"));
    expect(killedRows.map((r) => r.step)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const row of killedRows.slice(1))
      expect([row["train/skipped"], row["train/loss"]]).toEqual([0, expect.any(Number)]);
    expect(withoutTimes(killedRows)).toEqual(withoutTimes(baseline.metrics));
    expect(await readJsonl(join(killed, "samples.jsonl"))).toEqual(
      await readJsonl(join(dir, "baseline", "samples.jsonl")),
    );
  });

  it("skips failing rollouts under policy continue, dropping groups left too small, and counts both", async () => {
    const { dir, recipe } = await grpoRun({
      steps: 2,
      worker: fixture("failing-worker.ts"),
      className: "FailingWorker",
      extra: "runtime_monitor: {exception_handling: {policy: continue}}\n",
    });
    const result = await runRecipe(recipe, { outputDir: join(dir, "out"), minGroupSize: 4 });
    const row = result.metrics[0]!;
    expect(row).toMatchObject({
      "rollout/failed": 2,
      "rollout/skipped": 2,
      "rollout/groups_dropped": 2,
      "rollout/num_trajectories": 0,
      "train/skipped": 1,
    });
    const kept = await runRecipe(recipe, { outputDir: join(dir, "kept") });
    // rewards 1, 2, 3 per group: the run at the group mean has advantage 0 and no datum
    expect(kept.metrics[0]).toMatchObject({
      "rollout/skipped": 2,
      "rollout/groups_dropped": 0,
      "rollout/num_trajectories": 6,
      "train/num_datums": 4,
      "train/datums_without_signal": 2,
    });
    const strict = await writeRecipe(
      dir,
      grpoRecipeYaml({ worker: fixture("failing-worker.ts"), className: "FailingWorker" }),
    );
    await expect(runRecipe(strict, { outputDir: join(dir, "strict") })).rejects.toThrow(
      /rollout of row \d+ \(group 0-\d+, run 0\) failed after 1 attempt\(s\): Error: worker crashed on row \d+\n/,
    );
  });

  it("rolls out ahead of the trainer in batch-async mode within the staleness threshold", async () => {
    const { dir, recipe } = await grpoRun({
      steps: 4,
      extra: "weight: {sync_mode: batch-async, staleness_threshold: 1}\n",
    });
    const result = await runRecipe(recipe, { outputDir: join(dir, "out") });
    const maxima = result.metrics.map((r) => r["staleness/max"]);
    expect(maxima.every((m) => m === 0 || m === 1)).toBe(true);
    expect(maxima).toContain(1);
    expect(result.metrics.every((r) => r["staleness/dropped"] === 0)).toBe(true);
  });

  it("trains fully-async with batch_size_reached, never on trajectories older than the threshold", async () => {
    const extra =
      "weight: {sync_mode: fully-async, staleness_threshold: 1}\ntrajectory_pool: {batch_size: 8, check_batch_ready_function: batch_size_reached}\n";
    const { dir, recipe } = await grpoRun({ steps: 4, extra }, ["data.keep_batch_order=false"]);
    const result = await runRecipe(recipe, { outputDir: join(dir, "out") });
    expect(result.metrics.map((r) => r.step)).toEqual([1, 2, 3, 4]);
    for (const row of result.metrics) {
      expect(row["rollout/num_trajectories"]).toBeGreaterThanOrEqual(8);
      expect(row["staleness/max"]).toBeLessThanOrEqual(1);
    }
  });

  it("warm-starts from another run's checkpoint with resume_dataloader: false", async () => {
    const dir = await tempDir();
    await writeJsonl(join(dir, "train.jsonl"), pigLatinRows(12));
    const yaml = (
      extra: string,
    ) => `data: {data_files: [train.jsonl], prompt_key: input, batch_size: 4, max_prompt_length: 32}
rollout_worker: {type: pig_latin, max_response_length: 40, max_sequence_length: 80}
trainer: {type: remote_api_cross_entropy, total_train_steps: 6, save_freq: 6}
service: {train_service: {backend: local, model: tiny, config: {learning_rate: 0.01}}}
${extra}`;
    const sft = await runRecipe(await writeRecipe(dir, yaml("")), { outputDir: join(dir, "sft") });
    const events: RunEvent[] = [];
    const warm = await runRecipe(
      await writeRecipe(dir, yaml(`resume: {mode: from_path, resume_path: sft, resume_dataloader: false}\n`)),
      { outputDir: join(dir, "warm"), onEvent: (e) => events.push(e) },
    );
    expect(events[0]).toMatchObject({
      type: "start",
      start: "warm_start",
      fromStep: 0,
      from: join(dir, "sft", "checkpoints", "step_000006.json"),
    });
    expect(warm.metrics.map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(warm.metrics[0]!["train/loss"]!).toBeLessThan(sft.metrics[0]!["train/loss"]! - 0.5);
    const missing = await writeRecipe(dir, yaml(`resume: {mode: from_path, resume_path: nowhere}\n`));
    await expect(runRecipe(missing, { outputDir: join(dir, "x") })).rejects.toThrow(
      new RunError(
        `resume.resume_path ${join(process.cwd(), "nowhere")} does not exist; point it at a run folder, its checkpoints/ folder or a step_NNNNNN.json file`,
        { code: "setup" },
      ),
    );
  });

  it("fails with the documented errors for recipes it cannot run", async () => {
    const { dir } = await grpoRun();
    const out = join(dir, "out");
    const wrongClass = await writeRecipe(dir, grpoRecipeYaml({ className: "LetterWorkr" }));
    const error = (await runRecipe(wrongClass, { outputDir: out }).catch((e: unknown) => e)) as RecipeError;
    expect(error).toBeInstanceOf(RecipeError);
    expect(error.message).toContain("has no export `LetterWorkr`");
    expect(error.message).toContain("did you mean `LetterWorker`?");
    await expect(writeRecipe(dir, grpoRecipeYaml({ worker: "missing.ts" }))).rejects.toBeInstanceOf(RecipeError);
    const tooLong = await writeRecipe(dir, grpoRecipeYaml(), ["rollout_worker.max_sequence_length=500"]);
    await expect(runRecipe(tooLong, { outputDir: out })).rejects.toThrow(
      new RunError(
        "rollout_worker.max_sequence_length (500) is longer than the context of model tiny (128 tokens); lower it, with max_response_length and max_prompt_length to fit",
        { code: "setup" },
      ),
    );
    const filtered = await writeRecipe(dir, grpoRecipeYaml(), [
      "+data.filter_prompts=true",
      "data.max_prompt_length=5",
      "rollout_worker.max_sequence_length=20",
    ]);
    const noTask = await runRecipe(filtered, { outputDir: out }).catch((e: unknown) => e);
    expect(noTask).toBeInstanceOf(InputError);
    expect((noTask as Error).message).toMatch(
      /^no task left in .*train\.jsonl: all 6 rows have prompts longer than 5 tokens \(data\.max_prompt_length\)$/,
    );
    const openai = await writeRecipe(dir, grpoRecipeYaml(), [
      "+service.inference_service.backend=vllm",
      "+service.inference_service.base_url=http://127.0.0.1:1",
    ]);
    await expect(runRecipe(openai, { outputDir: out })).rejects.toThrow(
      new RunError(
        "rollouts through an vllm inference server are not available yet: weight sync cannot push new weights to it. Leave service.inference_service.backend unset to sample through the training service",
        { code: "backend" },
      ),
    );
  });
});

/** Rows without timing fields, for comparisons. */
export type Untimed = ReturnType<typeof withoutTimes>;
export type Row = MetricsRow;
