/**
 * What the run report shows, computed from a run folder: the summary figures, the metric
 * families and their charts, the rollouts, the configuration and the checkpoints. The page
 * renders it as it is, both when embedded in a report file and when served by `--watch`.
 * @module
 */
import { basename, relative } from "node:path";
import type { MetricsRow } from "../pipeline/events.js";
import type { SampleRow } from "../pipeline/samples.js";
import { appendAll } from "../types/arrays.js";
import { configValue, type RunFolder } from "../run-folder/read.js";
import type { RunSnapshot, RunWeights } from "../run-folder/weights.js";

/** A metric's value at a step. */
export interface StepValue {
  /** The step. */
  step: number;
  /** The value. */
  value: number;
}

/** First and last value of a metric over the steps that have it. */
export interface FirstLast {
  /** The metric. */
  key: string;
  /** Its first value and step. */
  first: StepValue;
  /** Its last value and step. */
  last: StepValue;
  /** Its highest value and step (the best validation, for `val/reward_mean`). */
  max: StepValue;
}

/** One figure of the summary: a label and a value as text. */
export interface SummaryItem {
  /** What it is. */
  label: string;
  /** The value, formatted. */
  value: string;
}

/** The summary at the top of the report. */
export interface ReportSummary {
  /** Facts about the run: recipe, backend, model, trainer, steps, wall time, tokens, failures. */
  items: SummaryItem[];
  /** Reward, loss and validation reward, first → last (each only when the run has it). */
  trends: FirstLast[];
}

/** A chart: a metric over the steps, with its validation counterpart overlaid when there is one. */
export interface ReportChart {
  /** The metric plotted. */
  key: string;
  /** The `val/*` metric overlaid as points (for `rollout/reward_mean`: `val/reward_mean`). */
  overlay?: string;
  /** True when the metric has the same value at every step (such charts come last in their family). */
  constant: boolean;
}

/** The charts of one metric family (the part of the keys before the first `/`). */
export interface ReportFamily {
  /** The family: `rollout`, `train`, `val`, `time`, … (`other` for keys without a `/`). */
  name: string;
  /** One chart per metric of the family. */
  charts: ReportChart[];
}

/** A checkpoint as the report lists it, paths relative to the run folder where they are inside it. */
export interface ReportCheckpoint {
  /** Its step. */
  step: number;
  /** The run-state file. */
  file: string;
  /** The training state (weights and optimizer). */
  trainingState: string;
  /** The sampler path it recorded, and that sampler's step. */
  sampler: string;
  /** The step of that sampler's weights. */
  samplerVersion: number;
  /** When it was written. */
  savedAt: string;
}

/** Everything the report page renders. */
export interface ReportData {
  /** The run's name (its folder's name). */
  title: string;
  /** The run folder, absolute. */
  runDir: string;
  /** When this data was read (ISO 8601). */
  generatedAt: string;
  /** The summary. */
  summary: ReportSummary;
  /** Families in display order, with their charts. */
  families: ReportFamily[];
  /** The rows of `metrics.jsonl`. */
  metrics: MetricsRow[];
  /** The rows of `samples.jsonl`. */
  samples: SampleRow[];
  /** The resolved configuration as YAML, secrets redacted. */
  config: string;
  /** Checkpoints (run states). */
  checkpoints: ReportCheckpoint[];
  /** The local engine's sampler snapshots. */
  snapshots: RunSnapshot[];
  /** Rows of `failures.jsonl`, the latest last (at most 200). */
  failures: Record<string, unknown>[];
}

/** Families shown first, in this order; any other family follows, alphabetically. */
const FAMILY_ORDER = ["rollout", "train", "val", "agent", "staleness", "time", "tokens", "cost", "optim"];

/** The metrics the summary follows first → last; each leads its family's charts. */
const HEADLINE = ["rollout/reward_mean", "train/loss", "val/reward_mean"];

/** The family of a metric key. */
function familyOf(key: string): string {
  const slash = key.indexOf("/");
  return slash <= 0 ? "other" : key.slice(0, slash);
}

/** The metric families of `rows`, in display order, each with a chart per key (validation overlaid). */
export function metricFamilies(rows: readonly MetricsRow[]): ReportFamily[] {
  const values = new Map<string, Set<number>>();
  for (const row of rows)
    for (const [key, value] of Object.entries(row))
      if (key !== "step" && typeof value === "number") {
        const seen = values.get(key) ?? new Set<number>();
        values.set(key, seen.add(value));
      }
  const byFamily = new Map<string, ReportChart[]>();
  for (const key of [...values.keys()].sort()) {
    const family = familyOf(key);
    const rest = key.slice(family.length + 1);
    const overlay = family !== "val" && family !== "other" && values.has(`val/${rest}`) ? `val/${rest}` : undefined;
    const charts = byFamily.get(family) ?? [];
    charts.push({ key, ...(overlay && { overlay }), constant: values.get(key)!.size === 1 });
    byFamily.set(family, charts);
  }
  // The headline metrics first, then those that move, then flat lines.
  const rank = (c: ReportChart): number => (HEADLINE.includes(c.key) ? 0 : c.constant ? 2 : 1);
  for (const charts of byFamily.values()) charts.sort((a, b) => rank(a) - rank(b));
  const order = (name: string): number => {
    const i = FAMILY_ORDER.indexOf(name);
    return i < 0 ? FAMILY_ORDER.length : i;
  };
  return [...byFamily.entries()]
    .sort(([a], [b]) => order(a) - order(b) || a.localeCompare(b))
    .map(([name, charts]) => ({ name, charts }));
}

/** First, last and highest value of `key` over `rows`, or undefined when no row has it. */
export function firstLast(rows: readonly MetricsRow[], key: string): FirstLast | undefined {
  const points = rows.flatMap((row) => {
    const value = row[key];
    return typeof value === "number" && Number.isFinite(value) ? [{ step: row.step, value }] : [];
  });
  if (points.length === 0) return undefined;
  const max = points.reduce((best, p) => (p.value > best.value ? p : best));
  return { key, first: points[0]!, last: points.at(-1)!, max };
}

const sum = (rows: readonly MetricsRow[], key: string): number =>
  rows.reduce((total, row) => total + (typeof row[key] === "number" ? row[key] : 0), 0);

const has = (rows: readonly MetricsRow[], key: string): boolean => rows.some((row) => typeof row[key] === "number");

/** Seconds as `1 h 02 min`, `3 min 05 s` or `12.3 s`. */
export function formatDuration(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.round(seconds);
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return h > 0 ? `${h} h ${String(m).padStart(2, "0")} min` : `${m} min ${String(r).padStart(2, "0")} s`;
}

const integer = (n: number): string => Math.round(n).toLocaleString("en-US");

/**
 * The accounting figures (`tokens/*`, `cost/*`), when the run recorded them: a key named
 * `…total…` or `…cumulative…` is a running total (its last value), any other is per step (summed).
 */
function accountingItems(rows: readonly MetricsRow[]): SummaryItem[] {
  const keys = [...new Set(rows.flatMap((row) => Object.keys(row)))]
    .filter((key) => key.startsWith("tokens/") || key.startsWith("cost/"))
    .sort();
  return keys.map((key) => {
    const running = /total|cumulative/.test(key);
    const value = running ? (firstLast(rows, key)?.last.value ?? 0) : sum(rows, key);
    const text = key.startsWith("cost/") ? value.toFixed(value < 1 ? 4 : 2) : integer(value);
    return { label: running ? key : `${key} (sum over steps)`, value: text };
  });
}

/** The summary figures of a run. */
function summarize(run: RunFolder, weights: RunWeights): ReportSummary {
  const rows = run.metrics;
  const cfg = (path: string): string | undefined => {
    const value = configValue(run.config, path);
    return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
  };
  const trainingRows = rows.filter((row) => row.step > 0);
  const lastStep = rows.reduce((max, row) => Math.max(max, row.step), 0);
  const total = cfg("trainer.total_train_steps");
  const wall =
    sum(trainingRows, "time/step_s") +
    sum(
      rows.filter((row) => row.step === 0),
      "time/validation_s",
    );
  const items: SummaryItem[] = [
    { label: "recipe", value: run.recipePath ?? cfg("experiment_name") ?? "?" },
    { label: "backend", value: cfg("service.train_service.backend") ?? "?" },
    { label: "model", value: cfg("service.train_service.model") ?? "?" },
    { label: "trainer", value: `${cfg("trainer.type") ?? "?"} (loss ${cfg("trainer.algorithm.loss_fn") ?? "?"})` },
    { label: "steps", value: `${lastStep}${total ? ` of ${total}` : ""}` },
    { label: "wall time", value: `${formatDuration(wall)} (sum of step times)` },
  ];
  if (run.sessions.length > 0)
    items.push({
      label: "sessions",
      value: run.sessions.map((s) => `${s.start} at ${s.startedAt}`).join("; "),
    });
  if (has(rows, "train/num_tokens"))
    items.push({ label: "tokens trained", value: integer(sum(rows, "train/num_tokens")) });
  appendAll(items, accountingItems(rows));
  const counts: Array<[string, string]> = [
    ["rollout/failed", "failed rollouts"],
    ["rollout/retried", "retried rollouts"],
    ["rollout/timed_out", "timed-out rollouts"],
    ["rollout/skipped", "skipped rollouts"],
    ["rollout/groups_dropped", "dropped groups"],
    ["train/skipped", "skipped training steps"],
    ["staleness/dropped", "stale trajectories dropped"],
    ["val/failed", "failed validation rollouts"],
  ];
  const problems = counts
    .filter(([key]) => sum(rows, key) > 0)
    .map(([key, label]) => `${integer(sum(rows, key))} ${label}`);
  items.push({ label: "failures and skips", value: problems.length ? problems.join(", ") : "none" });
  if (run.failures.length > 0) items.push({ label: "failures.jsonl", value: `${run.failures.length} rows` });
  items.push({
    label: "checkpoints",
    value: weights.checkpoints.length ? weights.checkpoints.map((c) => c.step).join(", ") : "none",
  });
  const trends = HEADLINE.flatMap((key) => firstLast(rows, key) ?? []);
  return { items, trends };
}

/** `path` relative to `dir` when it is inside it, else as it is. */
function inside(dir: string, path: string): string {
  const rel = relative(dir, path);
  return rel && !rel.startsWith("..") && !rel.startsWith("/") ? rel : path;
}

/** Rows of `failures.jsonl` kept in the report. */
const FAILURES_SHOWN = 200;

/** The report of a run folder read with `readRunFolder` and `readRunWeights`. */
export function buildReportData(run: RunFolder, weights: RunWeights, now = new Date()): ReportData {
  return {
    title: basename(run.dir),
    runDir: run.dir,
    generatedAt: now.toISOString(),
    summary: summarize(run, weights),
    families: metricFamilies(run.metrics),
    metrics: run.metrics,
    samples: run.samples,
    config: run.configText,
    checkpoints: weights.checkpoints.map((c) => ({
      step: c.step,
      file: inside(run.dir, c.file),
      trainingState: inside(run.dir, c.trainingState),
      sampler: inside(run.dir, c.samplerPath),
      samplerVersion: c.samplerVersion,
      savedAt: c.savedAt,
    })),
    snapshots: weights.snapshots.map((s) => ({ step: s.step, file: inside(run.dir, s.file) })),
    failures: run.failures.slice(-FAILURES_SHOWN),
  };
}
