/**
 * The {@link RunFingerprint} of a recipe, and what a worker says when its recipe's differs from
 * the one the run's driver published: a worker with another worker class, module, model or nexrl
 * version would otherwise run the driver's tasks and give other rewards without a word.
 * @module
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { parseModuleReference } from "../recipe/module-ref.js";
import { findRecipeFile } from "../recipe/paths.js";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { readFingerprint, type FingerprintModule, type RunFingerprint } from "./messages.js";
import { ConfigError } from "../errors.js";

const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

/** The recipe key of a custom worker's module, whose entry is named "worker class" in messages. */
const CUSTOM_MODULE = "rollout_worker.custom_rollout_worker_module_path";

/** A file the worker is loaded from: its path as the recipe gives it, and the export taken, if any. */
type WorkerFile = { path: string; export?: string } | undefined;

/** The file and export of a `file.ts:name` reference (`file.ts` alone: the default export). */
function referenced(value: string | null | undefined): WorkerFile {
  if (value == null) return undefined;
  const { modulePath, exportName } = parseModuleReference(value);
  return { path: modulePath, export: exportName };
}

/**
 * The fingerprint of `config` (loaded from `recipeDir`): its model, `tokenizer` (the name the run
 * loads it by: `tokenizerName`), worker type, and the content of every file its worker is loaded
 * from. Only those files are hashed, not what they import. Call it once the worker class has
 * loaded (so the files exist).
 */
export async function runFingerprint(
  config: RecipeConfig,
  recipeDir: string,
  tokenizer: string,
): Promise<RunFingerprint> {
  const worker = config.rollout_worker;
  const custom = worker.type === "custom" ? worker.custom_rollout_worker_module_path : undefined;
  const files: Array<[string, WorkerFile]> = [
    [
      CUSTOM_MODULE,
      custom === undefined ? undefined : { path: custom, export: worker.custom_rollout_worker_class_name },
    ],
    ["rollout_worker.agent_module_path", referenced(worker.agent_module_path)],
    ["rollout_worker.evaluator_module_path", referenced(worker.evaluator_module_path)],
    [
      "rollout_worker.nexau_agent_config_path",
      worker.nexau_agent_config_path === undefined ? undefined : { path: worker.nexau_agent_config_path },
    ],
  ];
  const modules: Record<string, FingerprintModule> = {};
  for (const [key, file] of files) {
    if (!file) continue;
    const path = findRecipeFile(file.path, { recipeDir }).found ?? file.path;
    modules[key] = { sha256: sha256(await readFile(path)), ...(file.export !== undefined && { export: file.export }) };
  }
  return {
    nexrl: version,
    model: config.service.train_service.model,
    tokenizer,
    worker_type: worker.type,
    modules,
    ...(worker.options !== undefined && { worker_options: sha256(sortedJson(worker.options)) }),
  };
}

function sha256(text: string | Buffer): string {
  return createHash("sha256").update(text).digest("hex");
}

/** `value` as JSON with every object's keys sorted, so that equal options hash alike whatever their order in the recipe. */
function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}

/** A module entry as messages show it. */
function describeModule(module: FingerprintModule | undefined): string {
  if (!module) return "none";
  const hash = `sha256 ${module.sha256.slice(0, 12)}…`;
  return module.export === undefined ? hash : `${module.export} (module ${hash})`;
}

/**
 * What differs between a worker's fingerprint and the driver's, each named with both values
 * (`model tiny vs the driver's small`); empty when they match.
 */
function fingerprintDifferences(own: RunFingerprint, driver: RunFingerprint): string[] {
  const differences: string[] = [];
  const compare = (name: string, mine: string, theirs: string): void => {
    if (mine !== theirs) differences.push(`${name} ${mine} vs the driver's ${theirs}`);
  };
  compare("worker type", own.worker_type, driver.worker_type);
  for (const key of new Set([...Object.keys(driver.modules), ...Object.keys(own.modules)]))
    compare(
      key === CUSTOM_MODULE ? "worker class" : key,
      describeModule(own.modules[key]),
      describeModule(driver.modules[key]),
    );
  const options = (hash: string | undefined): string => (hash === undefined ? "none" : `sha256 ${hash.slice(0, 12)}…`);
  compare("rollout_worker.options", options(own.worker_options), options(driver.worker_options));
  compare("model", own.model, driver.model);
  compare("tokenizer", own.tokenizer, driver.tokenizer);
  compare("nexrl", own.nexrl, driver.nexrl);
  return differences;
}

/**
 * The error of a worker whose fingerprint differs from the driver's on stream prefix `prefix`,
 * naming every difference; undefined when they match.
 */
function recipeMismatch(own: RunFingerprint, driver: RunFingerprint, prefix: string): ConfigError | undefined {
  const differences = fingerprintDifferences(own, driver);
  if (differences.length === 0) return undefined;
  const andVersion = own.nexrl === driver.nexrl ? "" : ` and nexrl ${driver.nexrl}`;
  return new ConfigError(
    `this worker's recipe does not match the run's driver (stream prefix ${prefix}): ${differences.join("; ")}; start the worker with the driver's recipe${andVersion}`,
  );
}

/**
 * The error of a worker whose fingerprint is `own` for the fingerprint `published` (the text of
 * key `key`) of the driver on stream prefix `prefix`: a mismatch, or a text this nexrl cannot read;
 * undefined when they match.
 */
export function publishedMismatch(
  own: RunFingerprint,
  published: string,
  key: string,
  prefix: string,
): ConfigError | undefined {
  const read = readFingerprint(published);
  if (read.ok) return recipeMismatch(own, read.value, prefix);
  return new ConfigError(
    `the run's driver published a recipe fingerprint (${key}) that nexrl ${own.nexrl} cannot read (${read.problem}): start the worker with the driver's nexrl version and recipe`,
  );
}
