/**
 * Reading a run folder: what `runRecipe` wrote there (`config.resolved.yaml`, `run.json`,
 * `metrics.jsonl`, `samples.jsonl`, `failures.jsonl`), for `nexrl report`, `nexrl sample` and
 * `nexrl serve --model`.
 * @module
 */
import { readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import type { MetricsRow } from "../outputs/events.js";
import type { SampleRow } from "../outputs/samples.js";
import type { FailureRow } from "../outputs/failures.js";
import { redactSecrets } from "../recipe/redact.js";
import { RunError } from "../errors.js";

/** One start or resume of a run, from `run.json`. */
export interface RunSession {
  /** When it started (ISO 8601). */
  startedAt: string;
  /** `fresh`, `resume` or `warm_start`. */
  start: string;
  /** The run state it started from. */
  from?: string;
}

/** What a run folder holds, read once. */
export interface RunFolder {
  /** The folder, absolute. */
  dir: string;
  /** The resolved recipe (`config.resolved.yaml`), secrets redacted again; `{}` when the file is missing. */
  config: Record<string, unknown>;
  /** The same recipe as YAML text, redacted. */
  configText: string;
  /** The recipe file the run was started from, from `run.json`. */
  recipePath: string | undefined;
  /** Sessions from `run.json` (one per start or resume). */
  sessions: RunSession[];
  /** Rows of `metrics.jsonl`, in file order. */
  metrics: MetricsRow[];
  /** Rows of `samples.jsonl`, in file order. */
  samples: SampleRow[];
  /** Rows of `failures.jsonl` (failed or skipped rollouts), when the run wrote one. */
  failures: FailureRow[];
}

/**
 * The rows of a JSON Lines file; `[]` when it is missing. A partial last line (a process killed
 * mid-write, or a file being appended to) is left out.
 */
export async function readJsonlRows<Row>(path: string): Promise<Row[]> {
  const text = await readFile(path, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
  const rows: Row[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    try {
      rows.push(JSON.parse(line) as Row);
    } catch {
      // Only the line being written can be cut; complete lines always parse.
    }
  }
  return rows;
}

/** Whether `dir` looks like a run folder: it holds `config.resolved.yaml`, `run.json` or `metrics.jsonl`. */
async function isRunFolder(dir: string): Promise<boolean> {
  for (const name of ["config.resolved.yaml", "run.json", "metrics.jsonl"])
    if ((await stat(join(dir, name)).catch(() => undefined))?.isFile()) return true;
  return false;
}

/**
 * Checks that `dir` is a run folder and returns its absolute path.
 * @throws {@link "nexrl/errors".RunError | RunError} when it is missing or holds none of a run's files.
 */
export async function checkRunFolder(dir: string, cwd = process.cwd()): Promise<string> {
  const abs = resolve(cwd, dir);
  const info = await stat(abs).catch(() => undefined);
  if (!info?.isDirectory())
    throw new RunError(
      `there is no run folder at ${abs}; give the folder a run wrote (runs/<tag>, or its --output-dir)`,
      { code: "run_folder" },
    );
  if (!(await isRunFolder(abs)))
    throw new RunError(
      `${abs} is not a run folder: it holds no config.resolved.yaml, run.json nor metrics.jsonl; give the folder a run wrote (runs/<tag>, or its --output-dir)`,
      { code: "run_folder" },
    );
  return abs;
}

async function readConfig(dir: string, env: Readonly<Record<string, string | undefined>>) {
  const text = await readFile(join(dir, "config.resolved.yaml"), "utf8").catch(() => undefined);
  if (text === undefined) return { config: {}, configText: "" };
  let value: unknown;
  try {
    value = parse(text);
  } catch (error) {
    throw new RunError(`${join(dir, "config.resolved.yaml")} is not valid YAML: ${(error as Error).message}`, {
      code: "run_folder",
    });
  }
  // The run wrote it redacted; redacting again guards against a file edited or written by an older version.
  const config = redactSecrets(
    value !== null && typeof value === "object" ? (value as Record<string, unknown>) : {},
    env,
  );
  return { config, configText: stringify(config) };
}

async function readRunJson(dir: string): Promise<{ recipePath: string | undefined; sessions: RunSession[] }> {
  try {
    const value = JSON.parse(await readFile(join(dir, "run.json"), "utf8")) as { recipe?: unknown; sessions?: unknown };
    return {
      recipePath: typeof value.recipe === "string" ? value.recipe : undefined,
      sessions: Array.isArray(value.sessions) ? (value.sessions as RunSession[]) : [],
    };
  } catch {
    return { recipePath: undefined, sessions: [] };
  }
}

/**
 * Reads the run folder `dir` (relative to `options.cwd`). Files a run has not written yet read as
 * empty; the values of secret environment variables in `options.env` are redacted from the
 * configuration.
 * @throws {@link "nexrl/errors".RunError | RunError} when `dir` is not a run folder.
 */
export async function readRunFolder(
  dir: string,
  options: { cwd?: string; env?: Readonly<Record<string, string | undefined>> } = {},
): Promise<RunFolder> {
  const abs = await checkRunFolder(dir, options.cwd);
  const env = options.env ?? process.env;
  const [{ config, configText }, run, metrics, samples, failures] = await Promise.all([
    readConfig(abs, env),
    readRunJson(abs),
    readJsonlRows<MetricsRow>(join(abs, "metrics.jsonl")),
    readJsonlRows<SampleRow>(join(abs, "samples.jsonl")),
    readJsonlRows<FailureRow>(join(abs, "failures.jsonl")),
  ]);
  // Failure rows carry error messages: redacted too, in case one quoted a secret.
  return { dir: abs, config, configText, ...run, metrics, samples, failures: redactSecrets(failures, env) };
}

/** The value at a dotted `path` of a parsed configuration, or undefined. */
export function configValue(config: Record<string, unknown>, path: string): unknown {
  let value: unknown = config;
  for (const key of path.split(".")) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}
