/** Recipes the pipeline suite runs, written with their data into a temporary folder. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadRecipe, type LoadedRecipe } from "../../dist/recipe/index.js";

/** A loaded recipe and the folder holding it, its data and its outputs. */
export interface TempRecipe {
  recipe: LoadedRecipe;
  dir: string;
  /** Removes the folder. */
  remove(): Promise<void>;
}

/** Writes `rows` to `train.jsonl` and `yaml` (which may refer to it) to `recipe.yaml`, and loads it. */
export async function tempRecipe(yaml: string, rows: readonly object[]): Promise<TempRecipe> {
  const dir = await mkdtemp(path.join(tmpdir(), "nexrl-bench-"));
  await writeFile(path.join(dir, "train.jsonl"), rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  await writeFile(path.join(dir, "recipe.yaml"), yaml);
  const recipe = await loadRecipe(path.join(dir, "recipe.yaml"), { env: {}, cwd: dir });
  return { recipe, dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
