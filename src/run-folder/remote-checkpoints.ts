/**
 * The Tinker checkpoints a run recorded (the training states and sampler paths in its run-state
 * files), or one `tinker://` path, with a connection to the service that holds them: what
 * `nexrl checkpoints` and `nexrl export --format peft` work on.
 * @module
 */
import { basename } from "node:path";
import { TinkerTrainingService } from "../backends/tinker/index.js";
import { parseRunModelRef, pickWeights, remoteOptions } from "./model.js";
import { configValue, readRunFolder } from "./read.js";
import { readRunWeights } from "./weights.js";
import { RunError } from "../errors.js";

/** One recorded checkpoint path. */
export interface RecordedCheckpoint {
  /** `tinker://…`. */
  tinkerPath: string;
  /** The step it holds, when a run recorded it. */
  step: number | undefined;
  /** What the run used it as: its training state, the sampler of a step, or the path given. */
  role: "training_state" | "sampler" | "given";
}

/** Where checkpoints are and how to reach them. */
export interface RemoteCheckpoints {
  /** A name for them: `<run folder name>[:<step>]`, or the path. */
  name: string;
  /** The run folder, when the target was one. */
  runDir: string | undefined;
  /** The checkpoints, oldest step first; a step's training state before its sampler. */
  checkpoints: RecordedCheckpoint[];
  /** The service (connect lazily; close it when done). */
  service: TinkerTrainingService;
}

/** Options of {@link remoteCheckpoints}. */
export interface RemoteCheckpointsOptions {
  /** Folder a relative run folder is found from. */
  cwd?: string;
  /** Environment: `TINKER_API_KEY` and `TINKER_BASE_URL`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Receives the service's retry warnings. */
  log?: (line: string) => void;
}

/**
 * The checkpoints of `target`: a `tinker://` path as it is; `RUN_DIR` every checkpoint its
 * run-state files recorded; `RUN_DIR:STEP` that step's (its training state, and its sampler when
 * it holds the same step). A run's service is the recipe's base URL with the key from the
 * environment, as `nexrl sample` uses.
 * @throws {@link "nexrl/errors".RunError | RunError} for a run that did not train on Tinker, or has no checkpoint (at STEP).
 */
export async function remoteCheckpoints(
  target: string,
  options: RemoteCheckpointsOptions = {},
): Promise<RemoteCheckpoints> {
  const env = options.env ?? process.env;
  if (target.startsWith("tinker://")) {
    return {
      name: target,
      runDir: undefined,
      checkpoints: [{ tinkerPath: target, step: undefined, role: "given" }],
      service: new TinkerTrainingService({ env, ...(options.log && { log: options.log }) }),
    };
  }
  const { dir, step } = parseRunModelRef(target);
  const run = await readRunFolder(dir, { ...(options.cwd !== undefined && { cwd: options.cwd }), env });
  const backend = configValue(run.config, "service.train_service.backend");
  if (backend !== "tinker")
    throw new RunError(
      `${run.dir} trained on ${String(backend)}, not tinker: it has no Tinker checkpoints` +
        (backend === "local" ? "; its weights are in the run folder (nexrl export)" : ""),
      { code: "run_folder" },
    );
  const { checkpoints } = await readRunWeights(run);
  const picked = step === undefined ? checkpoints : [pickWeights(run, checkpoints, [], step).checkpoint!];
  if (picked.length === 0)
    throw new RunError(
      `${run.dir} recorded no checkpoint (a run saves one at its end unless trainer.save_final is false)`,
      { code: "run_folder" },
    );
  const seen = new Set<string>();
  const recorded: RecordedCheckpoint[] = [];
  const add = (tinkerPath: string, at: number, role: RecordedCheckpoint["role"]): void => {
    if (!tinkerPath.startsWith("tinker://") || seen.has(tinkerPath)) return;
    seen.add(tinkerPath);
    recorded.push({ tinkerPath, step: at, role });
  };
  for (const c of picked) {
    add(c.trainingState, c.step, "training_state");
    if (step === undefined || c.samplerVersion === c.step) add(c.samplerPath, c.samplerVersion, "sampler");
  }
  return {
    name: `${basename(run.dir)}${step === undefined ? "" : `:${step}`}`,
    runDir: run.dir,
    checkpoints: recorded,
    service: new TinkerTrainingService(remoteOptions(run, "tinker", { env, ...(options.log && { log: options.log }) })),
  };
}
