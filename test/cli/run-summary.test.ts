import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.js";
import { runCli } from "../../src/cli/run.js";
import type { MetricsRow } from "../../src/outputs/events.js";
import { pigLatinOverrides, pigLatinRecipe, root, runNexrl, tempDir } from "../support/runs.js";

const PRICES = "+accounting.prices={prompt: 0.5, completion: 2, train: 1.5}";

async function metricsOf(dir: string): Promise<MetricsRow[]> {
  return (await readFile(join(dir, "metrics.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as MetricsRow);
}

/** The summary line of `label` (`reward (rollout/reward_mean)`, `tokens/trained_total`, …): its value text. */
function summaryValue(stdout: string, label: string): string {
  const line = stdout.split("\n").find((l) => l.trimStart().startsWith(`${label} `));
  expect(line, `no summary line "${label}" in:\n${stdout}`).toBeDefined();
  return line!.trim().slice(label.length).trim();
}

/** `first at step a → last at step b[; best x at step c]` as numbers. */
function trend(text: string): number[] {
  const m = /^(-?[\d.e+-]+) at step (\d+) → (-?[\d.e+-]+) at step (\d+)(?:; best (-?[\d.e+-]+) at step (\d+))?$/.exec(
    text,
  );
  expect(m, text).not.toBeNull();
  return m!
    .slice(1)
    .filter((x) => x !== undefined)
    .map(Number);
}

describe("the end-of-run summary", () => {
  it("ends a real run of the CLI with the metrics' first → last figures, tokens, cost, outputs and next commands", async () => {
    const out = await tempDir();
    const overrides = pigLatinOverrides({ steps: 4, saveFreq: 2, validateFreq: 2 });
    // From the run folder's parent, the summary shows the folder by its name.
    const run = await runNexrl(["-c", pigLatinRecipe, "-r", "-o", basename(out), ...overrides, PRICES], {
      cwd: dirname(out),
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(EXIT_CODES.ok);
    const rows = await metricsOf(out);
    const summary = run.stdout.slice(run.stdout.indexOf("run summary:"));
    expect(summary).toMatch(/^run summary: completed after step 4 of 4, [\d.]+ s of steps\n/);
    const series = (key: string) => rows.filter((r) => typeof r[key] === "number").map((r) => [r.step, r[key]!]);
    const close = (printed: number, value: number) =>
      expect(Math.abs(printed - value)).toBeLessThanOrEqual(Math.abs(value) * 5e-4);
    // pig_latin builds its trajectories from the rows (reward 1 each): the summary leads with the loss.
    expect(summary).not.toContain("(rollout/reward_mean)");
    expect(summary.split("\n")[1]).toMatch(/^ {2}loss \(train\/loss\)/);
    for (const [label, key] of [
      ["loss (train/loss)", "train/loss"],
      ["validation (val/reward_mean)", "val/reward_mean"],
    ] as const) {
      const points = series(key);
      expect(points.length).toBeGreaterThan(1);
      const [first, firstStep, last, lastStep, ...best] = trend(summaryValue(summary, label));
      close(first!, points[0]![1]!);
      close(last!, points.at(-1)![1]!);
      expect([firstStep, lastStep]).toEqual([points[0]![0], points.at(-1)![0]]);
      if (key === "val/reward_mean") {
        const top = points.reduce((a, b) => (b[1]! > a[1]! ? b : a));
        close(best[0]!, top[1]!);
        expect(best[1]).toBe(top[0]);
      }
    }
    const lastRow = rows.at(-1)!;
    for (const kind of ["prompt", "completion", "trained"]) {
      const key = `tokens/${kind}_total`;
      expect(Number(summaryValue(summary, key).replace(/,/g, "")), key).toBe(lastRow[key]);
    }
    expect(lastRow["tokens/trained_total"]).toBeGreaterThan(0);
    expect(summaryValue(summary, "cost/total")).toBe(lastRow["cost/total"]!.toFixed(4));
    const priced =
      lastRow["tokens/prompt_total"]! * 0.5 +
      lastRow["tokens/completion_total"]! * 2 +
      lastRow["tokens/trained_total"]! * 1.5;
    expect(lastRow["cost/total"]).toBeCloseTo(priced / 1e6, 12);
    expect(summaryValue(summary, "failures and skips")).toBe("none");
    const dir = basename(out);
    expect(summary).toContain(`outputs in ${dir}\n`);
    expect(summaryValue(summary, "metrics")).toBe(join(dir, "metrics.jsonl"));
    expect(summaryValue(summary, "samples")).toBe(join(dir, "samples.jsonl"));
    expect(summaryValue(summary, "checkpoints")).toBe(
      `${join(dir, "checkpoints")} (last: ${join(dir, "checkpoints", "step_000004.json")})`,
    );
    expect(summary).toContain(`next\n  nexrl report ${dir} --open\n  nexrl sample ${dir} 'PROMPT'`);
    expect(summary).toMatch(new RegExp(`\\n  nexrl export ${dir} +# Hugging Face and GGUF files`));
  }, 120_000);

  it("is printed without step lines when logger.backend leaves console out", async () => {
    const out = await tempDir();
    let stdout = "";
    const code = await runCli(
      [
        "-c",
        "recipe/pig_latin/local.yaml",
        "-r",
        "-o",
        out,
        "logger.backend=[jsonl]",
        ...pigLatinOverrides({ steps: 2, saveFreq: 0, validateFreq: 0 }),
        "trainer.save_final=false",
      ],
      {
        stdout: { write: (s: string) => (stdout += s) },
        stderr: { write: () => undefined },
        env: {},
        cwd: root,
        version: "0.0.0",
      },
    );
    expect(code).toBe(EXIT_CODES.ok);
    expect(stdout).not.toMatch(/step \d\/2 \|/);
    expect(stdout).toContain("done after step 2");
    expect(stdout).toContain("run summary: completed after step 2 of 2");
    // no checkpoint (save_final: false), and pig latin samples nothing: no weights of step 2 to sample
    expect(summaryValue(stdout, "checkpoints")).toBe("none saved");
    expect(stdout).not.toMatch(/^ {2}nexrl sample /m);
    expect(stdout).toContain("keep the final checkpoint: trainer.save_final: true");
    expect((await metricsOf(out)).map((r) => r.step)).toEqual([1, 2]);
  }, 60_000);
});
