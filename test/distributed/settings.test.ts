/**
 * What a distributed recipe shows before it runs (`nexrl validate`'s notes), the `nexrl worker`
 * command line, and the workers in the progress line: no Redis server needed.
 */
import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { checkRecipe } from "../../src/run/preflight.js";
import { ProgressPrinter } from "../../src/outputs/progress.js";
import { UsageError } from "../../src/errors.js";
import { grpoRecipeYaml, tempDir, writeJsonl, writeRecipe, additionRows } from "../support/pipeline.js";

describe("distributed settings", () => {
  it("validate notes where the run's Redis server is, without its password", async () => {
    const dir = await tempDir();
    await writeJsonl(`${dir}/train.jsonl`, additionRows(4));
    const yaml = grpoRecipeYaml().replace(
      "  max_sequence_length: 64\n",
      "  max_sequence_length: 64\n  distributed:\n    engine: redis\n    url: redis://:pass-word-9@10.0.0.5:6390\n    stream_prefix: exp1\n",
    );
    const recipe = await writeRecipe(dir, yaml);
    expect(recipe.config.rollout_worker.distributed).toMatchObject({
      claim_idle_ms: 60_000,
      max_deliveries: 3,
      heartbeat_ms: 2_000,
      inference: { host: "127.0.0.1", port: 0 },
    });
    const notes = (await checkRecipe(recipe, dir, {})).join("\n");
    expect(notes).toContain(
      "rollouts run on nexrl worker processes (nexrl worker -c recipe.yaml): the run connects to the Redis server 10.0.0.5:6390 (stream prefix exp1)",
    );
    expect(notes).not.toContain("pass-word-9");
  });

  it("parses nexrl worker and refuses a bad concurrency", () => {
    expect(
      parseCommandLine(["worker", "-c", "r.yaml", "--redis", "redis://h:1", "--concurrency", "8", "a.b=1"]),
    ).toEqual({
      kind: "worker",
      configPath: "r.yaml",
      overrides: ["a.b=1"],
      redis: "redis://h:1",
      concurrency: 8,
    });
    expect(() => parseCommandLine(["worker", "-c", "r.yaml", "--concurrency", "0"])).toThrow(UsageError);
    expect(() => parseCommandLine(["worker"])).toThrow("no recipe given");
    expect(() => parseCommandLine(["worker", "-c", "r.yaml", "stray"])).toThrow('unexpected argument "stray"');
  });

  it("shows the workers in the progress line", () => {
    let text = "";
    const printer = new ProgressPrinter({ write: (chunk: string) => (text += chunk) }, 4);
    printer.step(1, { "rollout/reward_mean": 0.5, "workers/alive": 3, "workers/tasks": 40, "workers/failures": 2 });
    expect(text).toContain(" | workers 3 (40 tasks, 2 failed) | ");
    text = "";
    printer.step(2, { "rollout/reward_mean": 0.5 });
    expect(text).not.toContain("workers");
  });
});
