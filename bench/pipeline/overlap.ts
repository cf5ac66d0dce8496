/**
 * Row 3 of the pipeline suite: the real training loop (`executeRun`, as `runRecipe` calls it)
 * against {@link FakeTrainingService}, whose rollouts take R and training steps take T. In sync
 * mode a step should take R + T; with `batch-async` and staleness 1 the next batch rolls out while
 * the trainer steps, so a step should take max(R, T). {@link timerStepMs} is that limit as this
 * machine keeps it: the same timers with nothing around them.
 */
import { mkdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { executeRun } from "../../dist/run/training-run.js";
import { FakeTrainingService, type FakeTimes } from "./fake-services.js";
import { tempRecipe } from "./recipe.js";

/** Steps per run; the first `WARM_STEPS` (start-up, the first rollouts) are not timed. */
const STEPS = 12;
const WARM_STEPS = 2;
/** Rows per loader batch and rollouts per row: 16 rollouts per step, all at once. */
const BATCH = 4;
const GROUP = 4;

function recipeYaml(mode: "sync" | "batch-async"): string {
  const worker = fileURLToPath(new URL("./overlap-worker.ts", import.meta.url));
  return `
data:
  data_files: [train.jsonl]
  batch_size: ${BATCH}
  rollout_repeat_n: ${GROUP}
  max_prompt_length: 32
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: ${worker}
  custom_rollout_worker_class_name: AlternatingRewardWorker
  num_workers: ${2 * BATCH * GROUP}
  max_response_length: 16
trainer:
  type: remote_api_grpo
  total_train_steps: ${STEPS}
service:
  train_service:
    backend: local
    model: tiny
    config:
      loss_fn: importance_sampling
weight:
  sync_mode: ${mode}
  staleness_threshold: ${mode === "sync" ? 0 : 1}
`;
}

/** Milliseconds per step once running: from the end of step `WARM_STEPS` to the end of the last, divided by the steps in between. */
function perStep(ends: readonly number[]): number {
  return (ends[STEPS - 1]! - ends[WARM_STEPS - 1]!) / (STEPS - WARM_STEPS);
}

/** {@link stepMs} of bare timers: a step is R then T in sync mode, R and T at once otherwise. */
export async function timerStepMs(mode: "sync" | "batch-async", times: FakeTimes): Promise<number> {
  const ends: number[] = [];
  for (let step = 0; step < STEPS; step++) {
    if (mode === "sync") {
      await sleep(times.rolloutMs);
      await sleep(times.trainMs);
    } else {
      await Promise.all([sleep(times.rolloutMs), sleep(times.trainMs)]);
    }
    ends.push(performance.now());
  }
  return perStep(ends);
}

/** Milliseconds per step of the pipeline once running (see {@link perStep}). */
export async function stepMs(mode: "sync" | "batch-async", times: FakeTimes): Promise<number> {
  const rows = Array.from({ length: (STEPS + 2) * BATCH }, (_, i) => ({ prompt: `row ${i}` }));
  const { recipe, dir, remove } = await tempRecipe(recipeYaml(mode), rows);
  const ends: number[] = [];
  try {
    // What runRecipe does before it hands over to executeRun.
    const outputDir = path.join(dir, "run");
    await mkdir(outputDir);
    const result = await executeRun({
      recipe,
      outputDir,
      checkpointDir: path.join(outputDir, "checkpoints"),
      start: { kind: "fresh" },
      session: 0,
      signal: undefined,
      emit: (event) => void (event.type === "step" && ends.push(performance.now())),
      samplesPerStep: 4,
      minGroupSize: undefined,
      env: {},
      redact: (text) => text,
      settings: {},
      service: new FakeTrainingService(times),
    });
    if (result.steps !== STEPS || ends.length !== STEPS)
      throw new Error(`the ${mode} run stopped after ${result.steps} steps (${result.stopReason})`);
  } finally {
    await remove();
  }
  return perStep(ends);
}
