import { spawn } from "node:child_process";
import { appendFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { MetricsRow } from "../../src/outputs/events.js";
import type { SampleRow } from "../../src/outputs/samples.js";
import { runRecipe } from "../../src/index.js";
import { writeReport } from "../../src/report/index.js";
import { readJsonlRows } from "../../src/run-folder/read.js";
import { pigLatinOverrides, pigLatinRecipe, root, runNexrl, tempDir } from "../support/runs.js";
import { hasChromium, openPage } from "./chromium.js";

/** The metric keys of `rows` by family (the part before the first `/`), as the test reads them. */
function familiesOf(rows: readonly MetricsRow[]): Map<string, string[]> {
  const families = new Map<string, string[]>();
  for (const key of new Set(rows.flatMap((row) => Object.keys(row).filter((k) => k !== "step")))) {
    const family = key.includes("/") ? key.slice(0, key.indexOf("/")) : "other";
    families.set(family, [...(families.get(family) ?? []), key]);
  }
  return families;
}

const count = (rows: readonly MetricsRow[], key: string): number =>
  rows.filter((row) => typeof row[key] === "number").length;

// Browser-side helpers; the tests' TypeScript has no DOM types, so page objects are `any`.
const backgrounds = (spans: any[]): string[] =>
  spans.map((s) => (globalThis as any).getComputedStyle(s).backgroundColor as string);
const chartKeys = (charts: any[]): string[] => charts.map((c) => c.dataset.key as string);

/** Points of each series of the chart of `key`, as uPlot holds them: [main, overlay?]. */
const chartPoints = (key: string) =>
  `(() => { const c = window.nexrlReport.charts.get(${JSON.stringify(key)}); return c ? c.data.slice(1).map((s) => Array.from(s).filter((v) => v !== null).length) : null; })()`;

describe("the run report in headless Chromium", () => {
  it.skipIf(!hasChromium)(
    "a pig latin run's report: no console error, a plot per metric with every point, rollouts with coloured tokens",
    async () => {
      const dir = await tempDir();
      const out = join(dir, "pig");
      const trained = await runNexrl([
        "-m",
        "training-service",
        "-c",
        pigLatinRecipe,
        "--run-nexrl",
        "-o",
        out,
        ...pigLatinOverrides({ steps: 6, saveFreq: 3, validateFreq: 3 }),
      ]);
      expect(trained.code, trained.stderr).toBe(0);
      const reported = await runNexrl(["report", out, "--output", join(dir, "report.html")]);
      expect([reported.code, reported.stdout]).toEqual([0, `${join(dir, "report.html")}\n`]);
      const metrics = await readJsonlRows<MetricsRow>(join(out, "metrics.jsonl"));
      const samples = await readJsonlRows<SampleRow>(join(out, "samples.jsonl"));
      const families = familiesOf(metrics);
      expect([...families.keys()]).toEqual(expect.arrayContaining(["rollout", "train", "val", "time", "staleness"]));

      const { page, errors, network, close } = await openPage();
      try {
        await page.goto(`file://${join(dir, "report.html")}`);
        await page.waitForSelector(".chart canvas");
        // the summary: loss and validation first → last, each with its sparkline (no reward: SFT rows all score 1)
        expect(await page.locator(".trend").evaluateAll((cards: any[]) => cards.map((c) => c.dataset.key))).toEqual([
          "train/loss",
          "val/reward_mean",
        ]);
        expect(await page.locator(".trend .spark canvas").count()).toBe(2);
        for (const [family, keys] of families) {
          const shown = await page.$$eval(`.family[data-family="${family}"] .chart`, chartKeys);
          expect(shown.sort(), family).toEqual([...keys].sort());
          for (const key of keys) {
            const points = (await page.evaluate(chartPoints(key))) as number[];
            expect(points[0], key).toBe(count(metrics, key));
          }
        }
        // validation overlaid where a metric has a val/ counterpart: 2 validations in 6 steps
        expect(count(metrics, "val/response_len_mean")).toBe(2);
        expect(await page.evaluate(chartPoints("rollout/response_len_mean"))).toEqual([6, 2]);
        const canvas = await page.$eval('.chart[data-key="train/loss"] canvas', (c: any) => c.width as number);
        expect(canvas).toBeGreaterThan(200);

        // the rollout browser at step 3
        await page.selectOption("#step-select", "3");
        const atStep = samples.filter((s) => s.step === 3);
        expect(atStep.length).toBeGreaterThan(0);
        const cards = page.locator("#rollout-browser article.rollout");
        expect(await cards.count()).toBe(atStep.length);
        for (const [i, sample] of atStep.entries()) {
          const card = cards.nth(i);
          expect(await card.locator("pre.prompt").textContent()).toBe(sample.prompt);
          const tokens = card.locator(".tok");
          expect(await tokens.count()).toBe(sample.response_tokens.ids.length);
          const colours = await tokens.evaluateAll(backgrounds);
          // SFT trains every response token: each is coloured as trained
          for (const colour of colours) expect(colour).toBe("rgba(37, 99, 235, 0.16)");
          const title = await tokens.first().getAttribute("title");
          expect(title).toContain(
            `token ${sample.response_tokens.ids[0]} ${JSON.stringify(sample.response_tokens.text[0])}`,
          );
          expect(title).toContain("trained (loss mask 1)");
          // a validation rollout: what the model wrote, marked, beside its target
          expect(await card.locator(".badge.validation").count()).toBe(sample.validation ? 1 : 0);
          expect(await card.locator("pre.target").count()).toBe(sample.target === undefined ? 0 : 1);
          if (sample.target !== undefined) expect(await card.locator("pre.target").textContent()).toBe(sample.target);
        }
        expect(atStep.filter((s) => s.validation).length).toBeGreaterThan(0);
        expect(await page.locator("#rollout-browser .count").textContent()).toMatch(
          /^\d+ rollouts and \d+ validation rollouts at step 3$/,
        );
        expect(await page.locator("#checkpoints table tr").count()).toBe(3);
        expect(await page.locator("#config pre").textContent()).toContain("type: remote_api_cross_entropy");
        await page.screenshot({ path: join(dir, "report.png"), fullPage: true });
        expect((await stat(join(dir, "report.png"))).size).toBeGreaterThan(20_000);
        expect(errors).toEqual([]);
        expect(network).toEqual([]);
      } finally {
        await close();
      }
    },
    120_000,
  );

  it.skipIf(!hasChromium)(
    "an agent run's report: advantages colour the tokens, each turn is labelled, each prefix break names the differing token",
    async () => {
      const dir = await tempDir();
      const fixture = (name: string) => fileURLToPath(new URL(`../agent/fixtures/${name}`, import.meta.url));
      const rows = ["hi", "hello", "hey", "yo"].map((question) => JSON.stringify({ question })).join("\n");
      await appendFile(join(dir, "train.jsonl"), `${rows}\n`);
      const recipe = [
        "data: {data_files: [train.jsonl], prompt_key: question, batch_size: 2, rollout_repeat_n: 2, max_prompt_length: 32, seed: 1}",
        `rollout_worker: {type: agent, agent_module_path: "${fixture("drifting-agent.ts")}:drift", evaluator_module_path: "${fixture("evaluators.ts")}:CharacterEvaluator", num_workers: 2, max_response_length: 8, max_sequence_length: 128}`,
        "trajectory_pool: {batch_size: 4}",
        "trainer: {type: remote_api_grpo, total_train_steps: 1}",
        "service: {train_service: {backend: local, model: tiny, config: {loss_fn: importance_sampling, learning_rate: 1e-3}}}",
      ].join("\n");
      await appendFile(join(dir, "recipe.yaml"), `${recipe}\n`);
      await runRecipe(join(dir, "recipe.yaml"), { outputDir: join(dir, "run"), env: {}, cwd: dir });
      const file = await writeReport(join(dir, "run"));
      const samples = await readJsonlRows<SampleRow>(join(dir, "run", "samples.jsonl"));
      const { page, errors, close } = await openPage();
      try {
        await page.goto(`file://${file}`);
        const cards = page.locator("#rollout-browser article.rollout");
        expect(await cards.count()).toBe(samples.length);
        for (const [i, sample] of samples.entries()) {
          const card = cards.nth(i);
          const sign = Math.sign(sample.advantage ?? 0);
          const colours = await card.locator(".tok.trained").evaluateAll(backgrounds);
          expect(colours.length).toBe(sample.response_tokens.loss_mask.filter((m) => m === 1).length);
          for (const colour of colours)
            expect(colour).toMatch(sign > 0 ? /^rgba\(22, 163, 74, / : /^rgba\(220, 38, 38, /);
          const turns = await card.locator(".turn").allTextContents();
          expect(turns).toEqual([`turn ${(sample.calls as Array<{ turn: number }>)[0]!.turn}`]);
          const logprob = await card.locator(".tok").first().getAttribute("title");
          expect(logprob).toContain(`logprob ${sample.response_tokens.logprobs![0]!.toFixed(4)}`);
          const breaks = card.locator(".break");
          expect(await breaks.count()).toBe(sample.diagnostics?.length ?? 0);
          for (const [k, d] of ((sample.diagnostics ?? []) as Array<Record<string, unknown>>).entries()) {
            const text = await breaks.nth(k).textContent();
            expect(text).toContain(`expected token ${d.expected_token}`);
            expect(text).toContain(`actual token ${d.actual_token}`);
            expect(await breaks.nth(k).locator("mark").allTextContents()).toEqual([
              Array.from(d.expected as string)[0],
              Array.from(d.actual as string)[0],
            ]);
          }
        }
        expect(samples.filter((s) => s.diagnostics).length).toBeGreaterThan(0);
        expect(errors).toEqual([]);
      } finally {
        await close();
      }
    },
    120_000,
  );

  it.skipIf(!hasChromium)(
    "--watch serves the report on 127.0.0.1 and the page redraws as metrics.jsonl and samples.jsonl grow",
    async () => {
      const dir = await tempDir();
      const out = join(dir, "pig");
      const { runRecipe: run } = await import("../../src/index.js");
      await run(pigLatinRecipe, {
        outputDir: out,
        overrides: pigLatinOverrides({ steps: 2, saveFreq: 0, validateFreq: 0 }),
        env: {},
        cwd: root,
      });
      const child = spawn(
        process.execPath,
        [join(root, "dist/cli/main.js"), "report", out, "--watch", "--interval", "200"],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let text = "";
          child.stdout.on("data", (chunk: Buffer) => {
            text += chunk.toString();
            const match = /serving (http:\/\/127\.0\.0\.1:\d+\/)/.exec(text);
            if (match) resolve(match[1]!);
          });
          child.once("exit", () => reject(new Error(`nexrl report --watch ended: ${text}`)));
        });
        const { page, errors, network, close } = await openPage(url);
        try {
          await page.goto(url);
          expect(await page.evaluate(chartPoints("train/loss"))).toEqual([2]);
          expect(await page.locator("#step-select option").allTextContents()).toEqual(["step 1", "step 2"]);
          const metrics = await readJsonlRows<MetricsRow>(join(out, "metrics.jsonl"));
          const samples = await readJsonlRows<SampleRow>(join(out, "samples.jsonl"));
          await appendFile(join(out, "metrics.jsonl"), `${JSON.stringify({ ...metrics.at(-1)!, step: 3 })}\n`);
          await appendFile(join(out, "samples.jsonl"), `${JSON.stringify({ ...samples.at(-1)!, step: 3 })}\n`);
          await page.waitForFunction(`${chartPoints("train/loss")}?.[0] === 3`);
          expect(await page.locator("#step-select option").allTextContents()).toEqual(["step 1", "step 2", "step 3"]);
          expect(await page.locator("#rollout-browser").getAttribute("data-step")).toBe("3");
          expect(await page.locator("#live").textContent()).toMatch(/1 update/);
          expect(errors).toEqual([]);
          expect(network.filter((u) => !u.startsWith(url))).toEqual([]);
        } finally {
          await close();
        }
      } finally {
        child.kill("SIGINT");
      }
      expect(await exited).toBe(0);
    },
    120_000,
  );
});
