/**
 * The recipe the distributed suite's `nexrl worker` processes load, written into a temporary
 * folder: a worker making one completion of fixed prompt ids (through the driver's relay, which
 * forwards it to the loopback server), reward 1, and `rollout_worker.distributed` pointing at the
 * suite's Redis. The task is CPU-light and latency-bound: each rollout waits for the server's
 * fixed delay and does almost nothing else. Each worker picks its stream prefix by an override.
 * The sleep worker, for the comparison with BullMQ, samples nothing: it waits
 * `NEXRL_BENCH_SLEEP_MS` and returns the trajectory of {@link SLEEP_COMPLETION}.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { completionTrajectory, type Trajectory } from "../../dist/index.js";
import type { InferenceResult } from "../../dist/entries/backends.js";
import { PROMPT_TOKENS, RESPONSE_TOKENS } from "../pipeline/completion.js";

const PACKAGE_ROOT = pathToFileURL(fileURLToPath(new URL("../../dist/index.js", import.meta.url))).href;

/** The completion the sleep worker's trajectory is made of, as if sampled. */
export const SLEEP_COMPLETION: InferenceResult = {
  promptTokens: [...PROMPT_TOKENS],
  responseTokens: [...RESPONSE_TOKENS],
  response: "x".repeat(RESPONSE_TOKENS.length),
  logprobs: RESPONSE_TOKENS.map((_, i) => -0.01 * (i + 1)),
  finishReason: "stop",
};

/** The sleep worker's trajectory (reward 1), which the BullMQ workers answer with too. */
export function sleepTrajectory(): Trajectory {
  return completionTrajectory(SLEEP_COMPLETION, 1);
}

/** The folder and the recipe in it. */
export interface BenchRecipe {
  dir: string;
  /** Absolute path of `recipe.yaml`. */
  file: string;
  remove(): Promise<void>;
}

/** Writes the echo and sleep workers, a data file and the recipe of one of them (default: echo). */
export async function writeBenchRecipe(options: { redisUrl: string; worker?: "echo" | "sleep" }): Promise<BenchRecipe> {
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
      `const COMPLETION = ${JSON.stringify(SLEEP_COMPLETION)};`,
      "/** Samples nothing: waits NEXRL_BENCH_SLEEP_MS, then returns a fixed completion's trajectory, reward 1. */",
      "export class SleepWorker extends BaseRolloutWorker {",
      "  async rollout() {",
      "    await new Promise((resolve) => setTimeout(resolve, Number(process.env.NEXRL_BENCH_SLEEP_MS)));",
      "    return completionTrajectory(structuredClone(COMPLETION), 1);",
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
  custom_rollout_worker_class_name: ${options.worker === "sleep" ? "SleepWorker" : "EchoWorker"}
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
