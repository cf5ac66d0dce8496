/**
 * The recipe the distributed suite's `nexrl worker` processes load, written into a temporary
 * folder: a worker making one completion of fixed prompt ids (through the driver's relay, which
 * forwards it to the loopback server), reward 1, and `rollout_worker.distributed` pointing at the
 * suite's Redis. The task is CPU-light and latency-bound: each rollout waits for the server's
 * fixed delay and does almost nothing else. Each worker picks its stream prefix by an override.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { PROMPT_TOKENS } from "../pipeline/completion.js";

const PACKAGE_ROOT = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

/** The folder and the recipe in it. */
export interface BenchRecipe {
  dir: string;
  /** Absolute path of `recipe.yaml`. */
  file: string;
  remove(): Promise<void>;
}

/** Writes the echo worker, a data file and the recipe. */
export async function writeBenchRecipe(options: { redisUrl: string }): Promise<BenchRecipe> {
  const dir = await mkdtemp(path.join(tmpdir(), "nexrl-bench-distributed-"));
  await writeFile(
    path.join(dir, "echo-worker.mjs"),
    [
      `import { BaseRolloutWorker, completionTrajectory } from ${JSON.stringify(PACKAGE_ROOT)};`,
      `const PROMPT = ${JSON.stringify(PROMPT_TOKENS)};`,
      "/** One completion of fixed prompt ids, reward 1. */",
      "export class EchoWorker extends BaseRolloutWorker {",
      "  async rollout() {",
      "    return completionTrajectory(await this.inferenceClient.completion([...PROMPT]), 1);",
      "  }",
      "}",
      "",
    ].join("\n"),
  );
  // The driver sends the rows with the tasks; the recipe needs a data file to load.
  await writeFile(path.join(dir, "train.jsonl"), `${JSON.stringify({ prompt: "row 0" })}\n`);
  const file = path.join(dir, "recipe.yaml");
  await writeFile(
    file,
    `data:
  data_files: [train.jsonl]
  batch_size: 8
  rollout_repeat_n: 8
  max_prompt_length: 64
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: echo-worker.mjs
  custom_rollout_worker_class_name: EchoWorker
  num_workers: 8
  max_response_length: 16
  max_sequence_length: 96
  distributed:
    engine: redis
    url: ${options.redisUrl}
trainer:
  type: remote_api_grpo
  total_train_steps: 1
service:
  train_service:
    backend: local
    model: tiny
    config:
      loss_fn: importance_sampling
      learning_rate: 0.001
`,
  );
  return { dir, file, remove: () => rm(dir, { recursive: true, force: true }) };
}
