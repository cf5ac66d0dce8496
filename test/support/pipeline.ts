/** Shared fixtures of the pipeline tests: temporary folders, small recipes and data files. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { loadRecipe, type LoadedRecipe } from "../../src/recipe/index.js";
import type { RolloutTask } from "../../src/contracts/task.js";

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A fresh temporary folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-pipeline-"));
  dirs.push(dir);
  return dir;
}

/** Absolute path of a file in `test/support/fixtures/`. */
export const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** Writes rows as JSON Lines. */
export async function writeJsonl(path: string, rows: readonly object[]): Promise<string> {
  await writeFile(path, rows.map((row) => JSON.stringify(row)).join("\n") + "\n");
  return path;
}

/** Arithmetic rows `What is a + b?` with small operands. */
export function additionRows(count: number): Array<{ prompt: string; ground_truth: string; data_source: string }> {
  return Array.from({ length: count }, (_, i) => {
    const [a, b] = [i % 7, (i * 3) % 5];
    return { prompt: `What is ${a} + ${b}?`, ground_truth: String(a + b), data_source: i % 2 ? "odd" : "even" };
  });
}

/** Pig Latin rows. */
export function pigLatinRows(count: number): Array<{ input: string; output: string }> {
  const words = ["hello", "apple", "string", "quiet", "dog", "cat"];
  const latin: Record<string, string> = {
    hello: "ello-hay",
    apple: "apple-way",
    string: "ing-stray",
    quiet: "iet-quay",
    dog: "og-day",
    cat: "at-cay",
  };
  return Array.from({ length: count }, (_, i) => {
    const phrase = [words[i % 6]!, words[(i + 1) % 6]!];
    return { input: phrase.join(" "), output: phrase.map((w) => latin[w]).join(" ") };
  });
}

/**
 * Writes `recipe.yaml` (YAML text) into `dir` and loads it with no environment.
 */
export async function writeRecipe(dir: string, yaml: string, overrides: string[] = []): Promise<LoadedRecipe> {
  const path = join(dir, "recipe.yaml");
  await writeFile(path, yaml);
  return loadRecipe(path, { env: {}, cwd: dir, overrides });
}

/** A small GRPO recipe on the tiny model with a custom worker (YAML text). */
export function grpoRecipeYaml(
  options: { worker?: string; className?: string; steps?: number; extra?: string } = {},
): string {
  return `
data:
  data_files: [train.jsonl]
  batch_size: 2
  rollout_repeat_n: 4
  shuffle: true
  seed: 7
  max_prompt_length: 40
rollout_worker:
  type: custom
  custom_rollout_worker_module_path: ${options.worker ?? fixture("letter-worker.ts")}
  custom_rollout_worker_class_name: ${options.className ?? "LetterWorker"}
  num_workers: 3
  temperature: 1.0
  max_response_length: 12
  max_sequence_length: 64
trainer:
  type: remote_api_grpo
  total_train_steps: ${options.steps ?? 3}
service:
  train_service:
    backend: local
    model: tiny
    config:
      loss_fn: importance_sampling
      learning_rate: 0.01
${options.extra ?? ""}`;
}

/** A task for unit tests of workers and runners. */
export function task(fields: Partial<RolloutTask> & { data?: Record<string, unknown> } = {}): RolloutTask {
  const data = fields.data ?? { prompt: "hi" };
  return {
    data,
    prompt: data.prompt as RolloutTask["prompt"],
    index: 0,
    epoch: 0,
    batchIndex: 0,
    groupId: "0-0",
    runId: 0,
    groupSize: 1,
    isVal: false,
    seed: 1,
    ...fields,
  };
}
