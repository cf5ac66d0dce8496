import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runRecipe } from "../../src/run/run-recipe.js";
import { loadRecipe } from "../../src/recipe/load.js";
import { readJsonlRows, readRunFolder } from "../../src/run-folder/read.js";
import { readRunWeights } from "../../src/run-folder/weights.js";
import { buildReportData } from "../../src/report/data.js";
import type { SampleRow } from "../../src/outputs/samples.js";
import { renderFiles } from "../../recipe/chat_sft/data/make_data.js";
import { ByteTokenizer } from "../../src/engine/index.js";
import { tempDir } from "../support/pipeline.js";

const RECIPE = join(import.meta.dirname, "../../recipe/chat_sft");

describe("recipe/chat_sft on the sft worker", () => {
  it("ships what data/make_data.ts produces, and every conversation fits the tiny model's context", () => {
    const tokenizer = new ByteTokenizer();
    for (const [name, content] of Object.entries(renderFiles())) {
      expect(readFileSync(join(RECIPE, "data", name), "utf8"), name).toBe(content);
      for (const line of content.trim().split("\n")) {
        const { messages } = JSON.parse(line) as { messages: Array<{ role: string; content: string }> };
        expect(tokenizer.applyChatTemplate(messages).length).toBeLessThanOrEqual(128);
      }
    }
  });

  it("a short run: val/nll falls, validation rollouts are in samples.jsonl with their step and target, and in the report", async () => {
    const dir = await tempDir();
    const outputDir = join(dir, "run");
    const recipe = await loadRecipe(join(RECIPE, "local.yaml"), {
      overrides: ["trainer.total_train_steps=30", "validate.eval.validate_freq=15"],
    });
    const lines: string[] = [];
    const result = await runRecipe(recipe, { outputDir, progress: { write: (text: string) => lines.push(text) } });
    expect(result.steps).toBe(30);
    const nll = result.metrics.filter((row) => typeof row["val/nll"] === "number");
    expect(nll.map((row) => row.step)).toEqual([0, 15, 30]);
    const [first, , last] = nll.map((row) => row["val/nll"]!);
    // Uniform over the byte tokenizer's 259 ids is ln 259 = 5.56 nats; 30 steps learn the answers' words.
    expect(first).toBeGreaterThan(5);
    expect(last).toBeLessThan(0.7 * first!);
    expect(nll.every((row) => row["val/nll_tokens"] === nll[0]!["val/nll_tokens"])).toBe(true);
    // Progress leads with the loss and the validation NLL, not the constant reward of the rows.
    const stepLines = lines
      .join("")
      .split("\n")
      .filter((line) => line.startsWith("step "));
    expect(stepLines[0]).toMatch(/^step 1\/30 \| loss \d/);
    expect(stepLines.at(-1)).toMatch(/^step 30\/30 \| loss [\d.]+ \| val nll [\d.]+ \| val [\d.]+ \|/);
    expect(lines.join("")).not.toMatch(/reward 1\.000 \|/);
    // The validation examples show the question (the last user message), what the model wrote and the target.
    expect(lines.join("")).toMatch(
      /\n {2}\w+ (plus|minus) \w+ → .* \(target: \w+ (plus|minus) \w+ is \w+\., reward [01]\.000\)\n/,
    );
    expect(result.summary.trends.map((t) => t.key)).toEqual(["train/loss", "val/nll", "val/reward_mean"]);

    const samples = await readJsonlRows<SampleRow>(join(outputDir, "samples.jsonl"));
    const validation = samples.filter((s) => s.validation);
    expect([...new Set(validation.map((s) => s.step))]).toEqual([0, 15, 30]);
    const targets = new Set(
      readFileSync(join(RECIPE, "data", "val.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { messages: Array<{ content: string }> }).messages.at(-1)!.content),
    );
    for (const s of validation) {
      expect(targets.has(s.target!)).toBe(true);
      expect(s.trained).toBe(false);
      expect(s.prompt).toMatch(/^<\|user\|>\n.+<\|assistant\|>\n$/s);
      expect(s.extra_fields?.validation_target).toBeUndefined();
    }
    // The same validation rows each time, so that the report compares what the model wrote across steps.
    const byStep = (step: number) => validation.filter((s) => s.step === step).map((s) => s.target);
    expect(byStep(30)).toEqual(byStep(0));
    expect(samples.filter((s) => !s.validation && s.step === 30).length).toBeGreaterThan(0);

    const run = await readRunFolder(outputDir);
    const report = buildReportData(run, await readRunWeights(run));
    expect(report.samples.filter((s) => s.validation)).toEqual(validation);
    const train = report.families.find((f) => f.name === "train")!;
    expect(train.charts.find((c) => c.key === "train/nll")?.overlay).toBe("val/nll");
  }, 120_000);
});
