/**
 * What the run report shows, computed from a run folder: the summary figures, the metric
 * families and their charts, the rollouts, the configuration and the checkpoints. The page
 * renders it as it is, both when embedded in a report file and when served by `--watch`.
 * @module
 */
import { basename, relative } from "node:path";
import type { FirstLast, MetricsRow } from "../outputs/events.js";
import {
  HEADLINE_METRICS,
  formatAccounting,
  formatDuration,
  formatInteger,
  summarizeMetrics,
} from "../outputs/run-summary.js";
import type { SampleRow } from "../outputs/samples.js";
import type { FailureRow } from "../outputs/failures.js";
import { configValue, type RunFolder } from "../run-folder/read.js";
import type { RunSnapshot, RunWeights } from "../run-folder/weights.js";

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
  failures: FailureRow[];
}

/** Families shown first, in this order; any other family follows, alphabetically. */
const FAMILY_ORDER = ["rollout", "train", "val", "agent", "staleness", "time", "tokens", "cost", "optim"];

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
  // The summary's first → last metrics lead their families.
  const rank = (c: ReportChart): number => (HEADLINE_METRICS.includes(c.key) ? 0 : c.constant ? 2 : 1);
  for (const charts of byFamily.values()) charts.sort((a, b) => rank(a) - rank(b));
  const order = (name: string): number => {
    const i = FAMILY_ORDER.indexOf(name);
    return i < 0 ? FAMILY_ORDER.length : i;
  };
  return [...byFamily.entries()]
    .sort(([a], [b]) => order(a) - order(b) || a.localeCompare(b))
    .map(([name, charts]) => ({ name, charts }));
}

/** The summary figures of a run: the run's facts, then what {@link summarizeMetrics} says of its metrics. */
function summarize(run: RunFolder, weights: RunWeights): ReportSummary {
  const cfg = (path: string): string | undefined => {
    const value = configValue(run.config, path);
    return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
  };
  const total = Number(cfg("trainer.total_train_steps"));
  const summary = summarizeMetrics(
    run.metrics,
    Number.isInteger(total) ? total : undefined,
    configValue(run.config, "rollout_worker.need_llm_inference") !== false,
  );
  const project = cfg("project_name");
  const experiment = cfg("experiment_name");
  const items: SummaryItem[] = [
    { label: "recipe", value: run.recipePath ?? experiment ?? "?" },
    ...(project !== undefined || experiment !== undefined
      ? [{ label: "experiment", value: [project, experiment].filter((s) => s !== undefined).join(" / ") }]
      : []),
    { label: "backend", value: cfg("service.train_service.backend") ?? "?" },
    { label: "model", value: cfg("service.train_service.model") ?? "?" },
    { label: "trainer", value: `${cfg("trainer.type") ?? "?"} (loss ${cfg("trainer.algorithm.loss_fn") ?? "?"})` },
    {
      label: "steps",
      value: `${summary.lastStep}${summary.totalSteps !== undefined ? ` of ${summary.totalSteps}` : ""}`,
    },
    { label: "wall time", value: `${formatDuration(summary.wallSeconds)} (sum of step times)` },
  ];
  if (run.sessions.length > 0)
    items.push({
      label: "sessions",
      value: run.sessions.map((s) => `${s.start} at ${s.startedAt}`).join("; "),
    });
  if (run.metrics.some((row) => typeof row["train/num_tokens"] === "number"))
    items.push({
      label: "tokens with loss (train/num_tokens)",
      value: formatInteger(run.metrics.reduce((n, row) => n + (row["train/num_tokens"] ?? 0), 0)),
    });
  for (const figure of summary.accounting)
    items.push({
      label: figure.running ? figure.key : `${figure.key} (sum over steps)`,
      value: formatAccounting(figure),
    });
  items.push({
    label: "failures and skips",
    value: summary.problems.length
      ? summary.problems.map((p) => `${formatInteger(p.count)} ${p.label}`).join(", ")
      : "none",
  });
  if (run.failures.length > 0) items.push({ label: "failures.jsonl", value: `${run.failures.length} rows` });
  items.push({
    label: "checkpoints",
    value: weights.checkpoints.length ? weights.checkpoints.map((c) => c.step).join(", ") : "none",
  });
  return { items, trends: summary.trends };
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
