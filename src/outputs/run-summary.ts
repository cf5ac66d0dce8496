/**
 * The summary of a run from its metrics rows: steps, wall time, reward, loss and validation first
 * → last with the best validation step, token and cost figures, failures and skips. The console
 * prints it at the end of a run ({@link formatRunSummary}) and `nexrl report` shows the same
 * figures.
 * @module
 */
import { relative } from "node:path";
import type { AccountingFigure, FirstLast, MetricsRow, RunResult, RunSummary } from "./events.js";

/** The metrics the summary follows first → last, in this order. */
export const HEADLINE_METRICS: readonly string[] = [
  "rollout/reward_mean",
  "train/loss",
  "dpo/accuracy",
  "rm/accuracy",
  "val/nll",
  "val/reward_mean",
];

/** How the summary names the headline metrics. */
const HEADLINE_NAMES: Readonly<Record<string, string>> = {
  "rollout/reward_mean": "reward",
  "train/loss": "loss",
  "dpo/accuracy": "DPO pair accuracy",
  "rm/accuracy": "reward-model pair accuracy",
  "val/nll": "validation NLL",
  "val/reward_mean": "validation",
};

/** The counts of failed and skipped work, with their words. */
const PROBLEMS: ReadonlyArray<readonly [string, string]> = [
  ["rollout/failed", "failed rollouts"],
  ["rollout/retried", "retried rollouts"],
  ["rollout/timed_out", "timed-out rollouts"],
  ["rollout/skipped", "skipped rollouts"],
  ["rollout/groups_dropped", "dropped groups"],
  ["train/skipped", "skipped training steps"],
  ["staleness/dropped", "stale trajectories dropped"],
  ["val/failed", "failed validation rollouts"],
];

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

/** The sum of `key` over `rows` (rows without it count 0). */
export function sumOf(rows: readonly MetricsRow[], key: string): number {
  return rows.reduce((total, row) => total + (typeof row[key] === "number" ? row[key] : 0), 0);
}

const isRunning = (key: string): boolean => /total|cumulative/.test(key);

/** The `tokens/*` and `cost/*` figures of `rows`: running totals at their last value, per-step keys summed. */
function accountingFigures(rows: readonly MetricsRow[]): AccountingFigure[] {
  const keys = new Set(
    rows.flatMap((row) => Object.keys(row)).filter((key) => key.startsWith("tokens/") || key.startsWith("cost/")),
  );
  // Tokens before costs; sampled prompt and completion tokens before trained ones.
  const rank = (key: string): number =>
    ["tokens/prompt", "tokens/completion", "tokens/trained", "tokens/", "cost/"].findIndex((p) => key.startsWith(p));
  return [...keys]
    .filter((key) => !keys.has(`${key}_total`) && !(key === "cost/step" && keys.has("cost/total")))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((key) => {
      const running = isRunning(key);
      return { key, value: running ? (firstLast(rows, key)?.last.value ?? 0) : sumOf(rows, key), running };
    });
}

/**
 * Summarises the metrics rows of a run (`RunResult.metrics`, or `metrics.jsonl` read back).
 * @param totalSteps `trainer.total_train_steps`, when known.
 * @param sampled false for a run whose worker builds its trajectories from the rows without
 *   sampling (`rollout_worker.need_llm_inference: false`, SFT): their reward is the worker's
 *   constant, so the summary leaves it out and leads with the loss.
 */
export function summarizeMetrics(rows: readonly MetricsRow[], totalSteps?: number, sampled = true): RunSummary {
  const trainingRows = rows.filter((row) => row.step > 0);
  const validation = firstLast(rows, "val/reward_mean");
  return {
    lastStep: rows.reduce((max, row) => Math.max(max, row.step), 0),
    totalSteps,
    wallSeconds:
      sumOf(trainingRows, "time/step_s") +
      sumOf(
        rows.filter((row) => row.step === 0),
        "time/validation_s",
      ),
    trends: HEADLINE_METRICS.filter((key) => sampled || key !== "rollout/reward_mean").flatMap(
      (key) => firstLast(rows, key) ?? [],
    ),
    bestValidation: validation?.max,
    accounting: accountingFigures(rows),
    problems: PROBLEMS.map(([key, label]) => ({ key, label, count: sumOf(rows, key) })).filter((p) => p.count > 0),
  };
}

/** Seconds as `1 h 02 min`, `3 min 05 s` or `12.3 s`. */
export function formatDuration(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.round(seconds);
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return h > 0 ? `${h} h ${String(m).padStart(2, "0")} min` : `${m} min ${String(r).padStart(2, "0")} s`;
}

/** A whole number with thousands separators. */
export function formatInteger(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** A metric's value with 4 significant digits (integers whole). */
export function formatFigure(value: number): string {
  return Number.isInteger(value) ? formatInteger(value) : String(Number(value.toPrecision(4)));
}

/** An accounting figure as text: costs with 4 decimals below 1 (2 above), token counts whole. */
export function formatAccounting(figure: AccountingFigure): string {
  const { key, value } = figure;
  return key.startsWith("cost/") ? value.toFixed(value < 1 ? 4 : 2) : formatInteger(value);
}

/** `path` as a shell word: as it is when it needs no quoting, else in single quotes. */
function shellWord(path: string): string {
  return /^[\w./:@%+=,-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}

/** Options of {@link formatRunSummary}. */
export interface FormatRunSummaryOptions {
  /** Paths are shown relative to this folder (default: the current directory). */
  cwd?: string;
}

/**
 * The end-of-run summary the console shows: how the run ended, the summary's figures, where its
 * outputs are, and the commands to go on with (`nexrl report`, `nexrl sample`, and a resume
 * after a stop).
 */
export function formatRunSummary(result: RunResult, options: FormatRunSummaryOptions = {}): string {
  const cwd = options.cwd ?? process.cwd();
  const shown = (path: string): string => {
    const rel = relative(cwd, path);
    return rel === "" ? "." : rel.startsWith("..") ? path : rel;
  };
  const { summary, outputs } = result;
  const lines: string[] = [];
  const row = (label: string, value: string): number => lines.push(`  ${label.padEnd(28)} ${value}`);
  const ended = { completed: "completed", aborted: "stopped", data_exhausted: "ran out of data" }[result.stopReason];
  const of = summary.totalSteps !== undefined ? ` of ${summary.totalSteps}` : "";
  lines.push(`run summary: ${ended} after step ${result.steps}${of}, ${formatDuration(summary.wallSeconds)} of steps`);
  for (const trend of summary.trends) {
    const best =
      trend.key === "val/reward_mean" && summary.bestValidation
        ? `; best ${formatFigure(summary.bestValidation.value)} at step ${summary.bestValidation.step}`
        : "";
    row(
      `${HEADLINE_NAMES[trend.key] ?? trend.key} (${trend.key})`,
      `${formatFigure(trend.first.value)} at step ${trend.first.step} → ${formatFigure(trend.last.value)} at step ${trend.last.step}${best}`,
    );
  }
  for (const figure of summary.accounting) row(figure.key, formatAccounting(figure));
  row(
    "failures and skips",
    summary.problems.length ? summary.problems.map((p) => `${formatInteger(p.count)} ${p.label}`).join(", ") : "none",
  );
  lines.push(`outputs in ${shown(outputs.runDir)}`);
  row("metrics", shown(outputs.metrics));
  row("samples", shown(outputs.samples));
  row(
    "checkpoints",
    result.lastCheckpoint ? `${shown(outputs.checkpoints)} (last: ${shown(result.lastCheckpoint)})` : "none saved",
  );
  if (outputs.failures) row("failures", `${shown(outputs.failures.path)} (${outputs.failures.rows} rows)`);
  const dir = shellWord(shown(outputs.runDir));
  lines.push("next");
  if (result.stopReason === "aborted" && result.lastCheckpoint)
    lines.push(
      `  nexrl -m training-service -c ${shellWord(shown(outputs.recipe))} --run-nexrl -o ${dir} resume.mode=auto   # continue the run`,
    );
  lines.push(`  nexrl report ${dir} --open`);
  if (outputs.sampleable) lines.push(`  nexrl sample ${dir} 'PROMPT'             # or prompts on stdin, one a line`);
  else
    lines.push(
      "  (to sample the trained model with nexrl sample, keep the final checkpoint: trainer.save_final: true)",
    );
  if (outputs.exportFormat === "both")
    lines.push(
      `  nexrl export ${dir}                    # Hugging Face and GGUF files, for transformers, vLLM, llama.cpp`,
    );
  else if (outputs.exportFormat === "peft")
    lines.push(`  nexrl export ${dir} --format peft      # the LoRA adapter, for vLLM --lora-modules and peft`);
  return `${lines.join("\n")}\n`;
}
