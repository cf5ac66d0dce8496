/** `nexrl serve --threads N`: parsed, checked, and given to every engine the server creates. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { MemoryBudget } from "../../src/server/memory-budget.js";
import { ModelStore } from "../../src/server/models.js";
import { UsageError } from "../../src/errors.js";

describe("nexrl serve --threads", () => {
  it("parses the thread count and refuses other values", () => {
    expect(parseCommandLine(["serve", "--threads", "3"])).toMatchObject({ kind: "serve", threads: 3 });
    expect(parseCommandLine(["serve"])).not.toHaveProperty("threads");
    for (const bad of ["0", "1.5", "x", "300"]) {
      expect(() => parseCommandLine(["serve", "--threads", bad])).toThrow(UsageError);
    }
    expect(() => parseCommandLine(["serve", "--threads", "0"])).toThrow(
      '--threads must be an integer from 1 to 256, got "0"',
    );
  });

  it("creates models and samplers with that many threads", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nexrl-serve-threads-"));
    try {
      const options = { outputDir: dir, seed: 0, budget: new MemoryBudget(undefined, ""), log: () => undefined };
      const store = new ModelStore({ ...options, threads: 3 });
      const model = store.createModel({ id: "m", baseModel: "tiny", owner: "o", trainingMode: "full_ft" });
      expect(model.engine.threads).toBe(3);
      const session = await store.openSampler("s", { baseModel: "tiny" }, "o");
      expect((session.sampler as { threads?: number }).threads).toBe(3);
      await model.engine.close();
      expect(
        new ModelStore(options).createModel({ id: "d", baseModel: "tiny", owner: "o", trainingMode: "full_ft" }).engine
          .threads,
      ).toBeGreaterThanOrEqual(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
