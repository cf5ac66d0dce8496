/**
 * Every shipped `local.yaml` runs alone from a clean folder, warm start included: a user project
 * with nexrl installed and a copy of the recipe folder, one `runRecipe` call per recipe (the
 * command's work). Runs are short (overrides; the copied warm-start recipes are cut to 3 steps);
 * `npm run bench -- learning` measures the full ones.
 */
import { cp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/index.js";
import { ROOT, userProject } from "../support/user-project.js";

/** A user project holding a copy of `recipe/<name>/`, its warm-start recipe (if any) cut to 3 steps. */
async function projectWith(name: string): Promise<string> {
  const dir = await userProject(0);
  await cp(join(ROOT, "recipe", name), join(dir, "recipe", name), { recursive: true });
  const sft = join(dir, "recipe", name, "sft_local.ts");
  const text = await readFile(sft, "utf8").catch(() => undefined);
  if (text !== undefined) {
    const cut = text.replace(/total_train_steps: \d+/, "total_train_steps: 3");
    expect(cut).not.toBe(text);
    await writeFile(sft, cut);
  }
  return dir;
}

/** Runs `recipe/<name>/local.yaml` in `dir` with no environment, as `nexrl -c … --run-nexrl --tag <tag>` does. */
const run = (dir: string, name: string, tag: string, overrides: string[]) =>
  runRecipe(`recipe/${name}/local.yaml`, { cwd: dir, env: {}, tag, overrides });

describe("the shipped local recipes run alone from a clean folder", () => {
  it("pig_latin/local.yaml trains and leaves its final checkpoint", async () => {
    const dir = await projectWith("pig_latin");
    const result = await run(dir, "pig_latin", "pig", ["trainer.total_train_steps=2", "validate.eval.validate_freq=2"]);
    expect(result.stopReason).toBe("completed");
    expect(result.init).toBeUndefined();
    expect(result.metrics.at(-1)).toMatchObject({ step: 2, "val/num_samples": 40 });
    expect(result.lastCheckpoint).toBe(join(dir, "runs", "pig", "checkpoints", "step_000002.json"));
  }, 120_000);

  for (const name of ["math", "agent_tools"]) {
    it(`${name}/local.yaml runs its warm start first, then reuses it`, async () => {
      const dir = await projectWith(name);
      const overrides = ["trainer.total_train_steps=2", "validate.validate_before_train=false"];
      const first = await run(dir, name, "a", overrides);
      expect(first.stopReason).toBe("completed");
      expect(first.init).toMatchObject({ recipe: join(dir, "recipe", name, "sft_local.ts"), reused: false });
      expect(first.init!.runDir).toMatch(new RegExp(`^${join(dir, "runs", "init", "sft_local-")}[0-9a-f]{12}$`));
      expect(first.init!.checkpoint).toBe(join(first.init!.runDir!, "checkpoints", "step_000003.json"));
      expect(first.metrics.map((row) => row.step)).toEqual([1, 2]);
      expect(first.lastCheckpoint).toBe(join(dir, "runs", "a", "checkpoints", "step_000002.json"));
      const second = await run(dir, name, "b", overrides);
      expect(second.init).toEqual({ ...first.init, reused: true });
    }, 240_000);
  }
});
