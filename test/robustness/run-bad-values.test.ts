/**
 * Issue 27, item 12: values that passed every check and failed later, somewhere else. A token id
 * outside the model's vocabulary is refused with the rollout that made it (it failed at training,
 * naming only a datum); a learning rate that overflows the weights is refused at the optimizer
 * step, before a checkpoint of NaN weights is saved and the next step blames the rollouts.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCliChild, userProject, writeRecipe, writeWorker } from "../support/user-project.js";

const run = (dir: string, ...overrides: string[]) =>
  runCliChild(["-c", "recipe.yaml", "-r", "-o", join(dir, "out"), ...overrides], { cwd: dir });

describe("values that used to fail later", () => {
  it("an out-of-vocabulary token id names its rollout", async () => {
    const dir = await userProject();
    await writeWorker(
      dir,
      `const t = this.ok(task);
    return { ...t, tokens: [...t.tokens.slice(0, -2), 99999, ...t.tokens.slice(-1)] };`,
    );
    await writeRecipe(dir);
    const result = await run(dir);
    expect(result.code).toBe(EXIT_CODES.runFailed);
    expect(result.stderr).toMatch(
      /^nexrl: rollout of row \d+ \(group \S+, run 0\) failed after 1 attempt\(s\): Trajectory \(group \S+, run 0\): tokens\[\d+\] is 99999, outside the model's vocabulary \(ids 0\.\.258\); encode text with the run's tokenizer/m,
    );
    expect(result.stderr).not.toContain("datum 0");
  });

  it("a learning rate of 1e308 stops at the optimizer step, saying so, with no checkpoint of NaN weights", async () => {
    const dir = await userProject();
    await writeWorker(dir);
    await writeRecipe(dir);
    const result = await run(dir, "service.train_service.config.learning_rate=1e308", "trainer.save_freq=1");
    expect(result.code).toBe(EXIT_CODES.runFailed);
    expect(result.stderr).toContain(
      "nexrl: the optimizer step with learning rate 1e+308 would make weights overflow a 32-bit float",
    );
    expect(result.stderr).toContain("lower the learning rate");
    expect(result.stderr).not.toMatch(/advantages|logprobs/);
    expect(await readdir(join(dir, "out", "checkpoints")).catch(() => [])).toEqual([]);
  });
});
