import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { MetricsRow } from "../../src/outputs/events.js";
import { firstLast, formatDuration } from "../../src/outputs/run-summary.js";
import { metricFamilies } from "../../src/report/data.js";
import { readReportData, renderReportHtml } from "../../src/report/index.js";
import { readJsonlRows } from "../../src/run-folder/read.js";
import { tempDir } from "../support/runs.js";

const rows: MetricsRow[] = [
  { step: 0, "val/reward_mean": 0.1, "time/validation_s": 2 },
  { step: 1, "rollout/reward_mean": 0.2, "train/loss": 3, "time/step_s": 10, "rollout/failed": 0, lr: 1 },
  { step: 2, "rollout/reward_mean": 0.5, "train/loss": 2, "time/step_s": 20, "rollout/failed": 2, lr: 1 },
  {
    step: 3,
    "rollout/reward_mean": 0.4,
    "train/loss": 1,
    "time/step_s": 30,
    "rollout/failed": 0,
    "val/reward_mean": 0.6,
  },
];

describe("the report's metric families", () => {
  it("group keys by prefix in a fixed order, overlay the validation counterpart, headline first and flat lines last", () => {
    const families = metricFamilies([...rows, { step: 4, "agent/calls": 3, "zeta/x": 1, "optim/lr:mean": 1 }]);
    expect(families.map((f) => f.name)).toEqual(["rollout", "train", "val", "agent", "time", "optim", "other", "zeta"]);
    // the summary's headline metric leads its family
    expect(families[0]!.charts).toEqual([
      { key: "rollout/reward_mean", overlay: "val/reward_mean", constant: false },
      { key: "rollout/failed", constant: false },
    ]);
    expect(families.find((f) => f.name === "time")!.charts).toEqual([
      { key: "time/step_s", constant: false },
      { key: "time/validation_s", constant: true },
    ]);
    expect(families.find((f) => f.name === "other")!.charts).toEqual([{ key: "lr", constant: true }]);
  });

  it("report first, last and best values over the steps that have the metric", () => {
    expect(firstLast(rows, "val/reward_mean")).toEqual({
      key: "val/reward_mean",
      first: { step: 0, value: 0.1 },
      last: { step: 3, value: 0.6 },
      max: { step: 3, value: 0.6 },
    });
    expect(firstLast(rows, "rollout/reward_mean")!.max).toEqual({ step: 2, value: 0.5 });
    expect(firstLast(rows, "nope")).toBeUndefined();
    expect([formatDuration(12.34), formatDuration(185), formatDuration(3725)]).toEqual([
      "12.3 s",
      "3 min 05 s",
      "1 h 02 min",
    ]);
  });
});

describe("readJsonlRows", () => {
  it("leaves out a line being written, and reads a missing file as empty", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "m.jsonl"), '{"step":1}\n\n{"step":2}\n{"step":3,"tra');
    expect(await readJsonlRows(join(dir, "m.jsonl"))).toEqual([{ step: 1 }, { step: 2 }]);
    expect(await readJsonlRows(join(dir, "none.jsonl"))).toEqual([]);
  });
});

/** A run folder written by hand: every file a run writes, with a secret left in the configuration. */
async function handMadeRun(): Promise<string> {
  const dir = join(await tempDir(), "hand");
  await mkdir(join(dir, "checkpoints"), { recursive: true });
  const config = [
    "experiment_name: demo",
    "trainer: {type: remote_api_grpo, total_train_steps: 5, algorithm: {loss_fn: ppo}}",
    "service:",
    "  train_service: {backend: tinker, model: Qwen/Qwen3-8B}",
    "  tinker_service: {api_key: tml-plain-secret, base_url: 'https://svc.example/?token=sk-env-secret-123'}",
  ].join("\n");
  const metrics = [
    ...rows,
    {
      step: 4,
      "tokens/prompt": 100,
      "tokens/completion": 50,
      "tokens/trained_total": 400,
      "cost/run_total_usd": 0.0123,
    },
  ];
  const sample = {
    step: 3,
    group: "g",
    run: 0,
    reward: 1,
    advantage: 0.5,
    policy_version: 2,
    prompt: "</script><script>window.pwned = 1</script>",
    response: "ok",
  };
  const state = {
    format: "nexrl.run-state",
    version: 1,
    step: 3,
    session: 0,
    trainingState: "tinker://m/weights/step_000003",
    sampler: { path: "tinker://m/sampler_weights/step_000003", version: 3 },
    initialSamplerPath: "tinker://m/sampler_weights/initial",
    data: {},
    pool: { ready: [] },
    seed: 1,
    model: { backend: "tinker", name: "Qwen/Qwen3-8B" },
    savedAt: "2026-12-01T00:00:00.000Z",
  };
  await writeFile(join(dir, "config.resolved.yaml"), `${config}\n`);
  await writeFile(join(dir, "metrics.jsonl"), metrics.map((r) => `${JSON.stringify(r)}\n`).join(""));
  await writeFile(join(dir, "samples.jsonl"), `${JSON.stringify(sample)}\n`);
  await writeFile(
    join(dir, "failures.jsonl"),
    `${JSON.stringify({ step: 2, error: "boom at ?token=sk-env-secret-123" })}\n`,
  );
  await writeFile(
    join(dir, "run.json"),
    JSON.stringify({ recipe: "/r/recipe.yaml", sessions: [{ startedAt: "t0", start: "fresh" }] }),
  );
  await writeFile(join(dir, "checkpoints", "step_000003.json"), JSON.stringify(state));
  return dir;
}

describe("the report data of a run folder", () => {
  it("summarises the run, redacts secrets again, lists checkpoints and shows accounting figures when present", async () => {
    const dir = await handMadeRun();
    const data = await readReportData(dir, { env: { SOME_TOKEN: "sk-env-secret-123" } });
    expect(data.title).toBe("hand");
    expect(data.config).toContain('api_key: "***"');
    expect(data.config).not.toContain("tml-plain-secret");
    expect(data.config).not.toContain("sk-env-secret-123");
    const items = Object.fromEntries(data.summary.items.map((i) => [i.label, i.value]));
    expect(items).toMatchObject({
      recipe: "/r/recipe.yaml",
      backend: "tinker",
      model: "Qwen/Qwen3-8B",
      trainer: "remote_api_grpo (loss ppo)",
      steps: "4 of 5",
      "wall time": "1 min 02 s (sum of step times)",
      experiment: "demo",
      "tokens/completion (sum over steps)": "50",
      "tokens/prompt (sum over steps)": "100",
      "tokens/trained_total": "400",
      "cost/run_total_usd": "0.0123",
      "failures and skips": "2 failed rollouts",
      "failures.jsonl": "1 rows",
      checkpoints: "3",
    });
    expect(data.summary.trends.map((t) => [t.key, t.first.value, t.last.value])).toEqual([
      ["rollout/reward_mean", 0.2, 0.4],
      ["train/loss", 3, 1],
      ["val/reward_mean", 0.1, 0.6],
    ]);
    expect(data.checkpoints).toEqual([
      {
        step: 3,
        file: "checkpoints/step_000003.json",
        trainingState: "tinker://m/weights/step_000003",
        sampler: "tinker://m/sampler_weights/step_000003",
        samplerVersion: 3,
        savedAt: "2026-12-01T00:00:00.000Z",
      },
    ]);
    expect(data.failures).toEqual([{ step: 2, error: "boom at ?token=***" }]);
  });

  it("renders one self-contained page: nothing fetched from the network, the data embedded intact", async () => {
    const data = await readReportData(await handMadeRun(), { env: {} });
    const html = await renderReportHtml(data);
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=["']?(https?:)?\/\//i);
    expect(html).toContain("https://github.com/leeoniya/uPlot (v1.6");
    expect(html).toContain("Copyright (c) 2022 Leon Sorokin");
    // the prompt's </script> cannot end the data element early
    expect(html.match(/<\/script>/g)).toHaveLength(4);
    const embedded = /<script id="report-data" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!;
    expect(JSON.parse(embedded)).toEqual(data);
  });
});
