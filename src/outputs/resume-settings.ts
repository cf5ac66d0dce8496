/**
 * The settings a checkpoint records so that a resume continues the same run: a resumed run whose
 * recipe changes the data order or the algorithm is refused, naming the setting, unless the
 * recipe lists it in `resume.allow_changed`.
 * @module
 */
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import type { RecipeConfig } from "../recipe/schema/recipe.js";
import { redactSecrets } from "../recipe/redact.js";
import { isPlainMap } from "../recipe/tree.js";
import { type ChangedSetting, RunError } from "../errors.js";

/** Key path (`data.seed`, `trainer.teachers.0.base_model`) → the setting's value as JSON. */
export type RunSettings = Record<string, string>;

/**
 * Recipe keys a resumed run may change freely: they decide how long the run goes, where things
 * are written, how it reports, how failures are handled and where services are, not which data
 * is trained on in which order nor how. A key covers the keys below it; `*` matches one list
 * index. Every other key is compared (an unknown key is compared too: refusing by mistake costs a
 * `resume.allow_changed` entry, accepting by mistake a silently different run). Module paths are
 * here because they say where code is; editing the code is always allowed. The training backend
 * and model are checked on their own and cannot be overridden.
 */
export const RESUME_SAFE_SETTINGS: readonly string[] = [
  "project_name",
  "experiment_name",
  "launch_mode",
  "multi_model",
  "logger",
  "accounting",
  "environment",
  "resume",
  "init",
  "runtime_monitor",
  "validate",
  "trainer.total_train_steps",
  "trainer.save_freq",
  "trainer.save_final",
  "trainer.checkpoint_path",
  "trainer.sync_weight_path",
  "trainer.remove_previous_ckpt",
  "trainer.custom_trainer_module_path",
  "trainer.teachers.*.base_url",
  "trainer.teachers.*.api_key",
  "rollout_worker.num_workers",
  "rollout_worker.rollout_timeout_seconds",
  "rollout_worker.max_rollout_retries",
  "rollout_worker.custom_rollout_worker_module_path",
  "rollout_worker.agent_module_path",
  "rollout_worker.evaluator_module_path",
  "rollout_worker.nexau_agent_config_path",
  "rollout_worker.nexau_agent_workspace",
  "rollout_worker.save_trace",
  "rollout_worker.trace_path",
  "rollout_worker.resource",
  "rollout_worker.task_name",
  "rollout_worker.agent.timeout_seconds",
  "rollout_worker.agent.gateway",
  "service.train_service.backend",
  "service.train_service.model",
  "service.train_service.identifier",
  "service.inference_service.identifier",
  "service.inference_service.base_url",
  "service.inference_service.api_key",
  "service.inference_service.max_retries",
  "service.tinker_service.base_url",
  "service.tinker_service.api_key",
  "service.weaver_service.base_url",
  "service.weaver_service.api_key",
  "weight.validate_freq",
  "weight.sync_method",
  "weight.sync_weight_path",
];

/** Where the recipe keeps the hyper-parameters `service.train_service.config` sets (they are merged). */
const HYPER_PARAMETERS = "trainer.algorithm";
const SERVICE_CONFIG = "service.train_service.config";

/** True when `pattern` (a key path, `*` for one index) is `key` or a prefix of it. */
function covers(pattern: string, key: string): boolean {
  if (pattern === SERVICE_CONFIG || pattern.startsWith(`${SERVICE_CONFIG}.`))
    pattern = HYPER_PARAMETERS + pattern.slice(SERVICE_CONFIG.length);
  const p = pattern.split(".");
  const k = key.split(".");
  return p.length <= k.length && p.every((segment, i) => segment === "*" || segment === k[i]);
}

function flatten(value: unknown, path: string, out: RunSettings): void {
  if (isPlainMap(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) flatten(child, path ? `${path}.${key}` : key, out);
  } else if (Array.isArray(value) && value.some((item) => isPlainMap(item))) {
    value.forEach((item, i) => flatten(item, `${path}.${i}`, out));
  } else if (value !== undefined) {
    out[path] = JSON.stringify(value);
  }
}

/**
 * The settings of `config` a resume compares: every key not in {@link RESUME_SAFE_SETTINGS}
 * (secrets redacted), with `data.data_files` recorded as file names and sizes, so that a project
 * moved to another folder resumes while changed data does not.
 */
export async function runSettings(config: RecipeConfig): Promise<RunSettings> {
  const all: RunSettings = {};
  flatten(redactSecrets(config, {}), "", all);
  const files = config.data.data_files ?? [];
  const sizes = await Promise.all(
    files.map((file) =>
      stat(file).then(
        (s) => s.size,
        () => undefined,
      ),
    ),
  );
  all["data.data_files"] = JSON.stringify(
    files.map((file, i) => `${basename(file)} (${sizes[i] === undefined ? "missing" : `${sizes[i]} bytes`})`),
  );
  return Object.fromEntries(
    Object.entries(all).filter(([key]) => !RESUME_SAFE_SETTINGS.some((pattern) => covers(pattern, key))),
  );
}

const show = (value: string | undefined): string => value ?? "unset";

/**
 * Compares the settings a checkpoint recorded with the recipe's.
 * @param allowed `resume.allow_changed`: keys (and the keys below them) that may differ;
 * `service.train_service.config.*` names the same hyper-parameters as `trainer.algorithm.*`.
 * @returns the differences `allowed` accepted, for a warning.
 * @throws {@link "nexrl/errors".RunError | RunError} for the others.
 */
export function checkResumeSettings(
  checkpoint: string,
  before: RunSettings,
  after: RunSettings,
  allowed: readonly string[],
): ChangedSetting[] {
  const changed: ChangedSetting[] = [];
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (before[key] !== after[key]) changed.push({ key, before: before[key], after: after[key] });
  }
  const accepted = changed.filter((c) => allowed.some((pattern) => covers(pattern, c.key)));
  const refused = changed.filter((c) => !accepted.includes(c));
  if (refused.length > 0) {
    const list = refused.map((c) => `${c.key} (${show(c.before)} → ${show(c.after)})`).join(", ");
    const keys = refused.map((c) => c.key).join(",");
    const merged = refused.some((c) => c.key.startsWith(`${HYPER_PARAMETERS}.`))
      ? ` (hyper-parameters set in ${SERVICE_CONFIG} are compared as ${HYPER_PARAMETERS})`
      : "";
    throw new RunError(
      `cannot resume from ${checkpoint}: the recipe changes ${refused.length === 1 ? "a setting" : "settings"} that decide the data order or the algorithm: ${list}${merged}. ` +
        `Resuming would not continue the same run. Restore ${refused.length === 1 ? "it" : "them"}, start a new run (another --output-dir, or resume.mode=disable), ` +
        `or accept the change with resume.allow_changed=[${keys}]`,
      { code: "resume_settings", changed: refused },
    );
  }
  return accepted;
}

/** The settings `allowed` names that a resume does not compare, for a warning (a typo accepts nothing). */
export function unknownAllowedSettings(allowed: readonly string[], before: RunSettings, after: RunSettings): string[] {
  const keys = [...Object.keys(before), ...Object.keys(after)];
  return allowed.filter((pattern) => !keys.some((key) => covers(pattern, key)));
}

/** Describes accepted changes for a warning. */
export function describeChanges(changes: readonly ChangedSetting[]): string {
  return changes.map((c) => `${c.key} (${show(c.before)} → ${show(c.after)})`).join(", ");
}
