/** `service.local_service`: threads and kernels of the embedded engine, reaching the engines a run creates. */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { threadPool } from "../../src/engine/thread-pool.js";
import { openTrainingService } from "../../src/run/services.js";
import { loadRecipe, type RecipeConfig } from "../../src/recipe/index.js";
import { datum } from "../../src/wire/wire.js";
import { MINIMAL_YAML, TRAIN_JSONL, recipeError, removeTempDirs, tempDir } from "../support/recipe.js";

afterAll(removeTempDirs);

async function load(yaml: string): Promise<RecipeConfig> {
  const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": yaml });
  return (await loadRecipe(join(dir, "r.yaml"), {})).config;
}

async function problems(yaml: string): Promise<string[]> {
  const dir = await tempDir({ "train.jsonl": TRAIN_JSONL, "r.yaml": yaml });
  const error = await recipeError(loadRecipe(join(dir, "r.yaml"), {}));
  return error.issues.map((issue) => `${issue.keyPath}: ${issue.message}`);
}

describe("service.local_service", () => {
  it("sets the threads of the local engines a run opens", async () => {
    const config = await load(`${MINIMAL_YAML}  local_service:\n    threads: 3\n    kernels: js\n`);
    expect(config.service.local_service).toEqual({ threads: 3, kernels: "js" });
    const service = openTrainingService(config, { outputDir: await tempDir(), env: {}, log: () => undefined });
    const client = await service.createTrainingClient({ baseModel: "tiny" });
    const data = Array.from({ length: 6 }, (_, i) =>
      datum([256, i + 1, i + 2], { target_tokens: [i + 1, i + 2, i + 3], weights: [1, 1, 1] }),
    );
    await (await client.forwardBackward(data, "cross_entropy")).result();
    // Three threads: the calling one and two workers.
    expect(threadPool.size).toBe(2);
    await service.close();
    expect(threadPool.size).toBe(0);
  });

  it("is optional, and refuses bad values and other backends", async () => {
    expect((await load(MINIMAL_YAML)).service.local_service).toBeUndefined();
    expect(await problems(`${MINIMAL_YAML}  local_service:\n    threads: 0\n`)).toEqual([
      "service.local_service.threads: expected a number >= 1, got 0",
    ]);
    expect(await problems(`${MINIMAL_YAML}  local_service:\n    kernels: gpu\n`)).toEqual([
      expect.stringMatching(/^service\.local_service\.kernels: .*"wasm".*"js"/),
    ]);
    const tinker = MINIMAL_YAML.replace("backend: local", "backend: tinker").replace("model: tiny", "model: m");
    expect(await problems(`${tinker}  tinker_service:\n    api_key: k\n  local_service:\n    threads: 2\n`)).toEqual([
      "service.local_service: applies only to `train_service.backend: local` (the embedded engine), not tinker; remove it",
    ]);
  });
});
