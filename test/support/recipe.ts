import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect } from "vitest";
import { RecipeError } from "../../src/errors.js";

const created: string[] = [];

/** Creates a temp folder holding `files` (path → content); removed by {@link removeTempDirs}. */
export async function tempDir(files: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-recipe-"));
  created.push(dir);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), content);
  }
  return dir;
}

/** Removes every folder made by {@link tempDir}. */
export async function removeTempDirs(): Promise<void> {
  await Promise.all(created.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
}

/** Awaits `promise`, expecting it to reject with a RecipeError, and returns the error. */
export async function recipeError(promise: Promise<unknown>): Promise<RecipeError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(RecipeError);
  return error as RecipeError;
}

/** The smallest valid recipe (needs a `train.jsonl` beside it). */
export const MINIMAL_YAML = `data:
  data_files: [train.jsonl]
rollout_worker:
  type: pig_latin
trainer:
  type: remote_api_cross_entropy
  total_train_steps: 3
service:
  train_service:
    backend: local
    model: tiny
`;

/** One task row. */
export const TRAIN_JSONL = '{"input": "hello", "output": "ello-hay"}\n';
