/**
 * `nexrl/testing`: helpers for the tests of your own workers and data generators. Run one
 * rollout of a worker outside a training run, with the inference client you choose (a
 * `SamplerInferenceClient` over the local engine, or your own fake), and draw reproducible
 * numbers for synthetic data.
 *
 * @example
 * ```ts
 * import { loadRecipe, LocalTrainingService, SamplerInferenceClient } from "nexrl";
 * import { ByteTokenizer } from "nexrl/engine";
 * import { rolloutTask, runRollout, workerSettings } from "nexrl/testing";
 * import { MyWorker } from "./worker.js";
 *
 * const { config } = await loadRecipe("recipe.yaml");
 * const tokenizer = new ByteTokenizer();
 * const worker = new MyWorker({ name: "test", settings: workerSettings(config), tokenizer });
 * const service = new LocalTrainingService({ outputDir: "/tmp/test-run" });
 * const samplingClient = await service.createSamplingClient("tiny"); // the base model of a preset
 * const inferenceClient = new SamplerInferenceClient({ samplingClient, tokenizer });
 * const trajectories = await runRollout(worker, rolloutTask({ prompt: "abc" }), { inferenceClient });
 * ```
 * @module nexrl/testing
 */
import type { DataRow } from "../contracts/task.js";
import { deriveSeed, seededRandom } from "../data/seed.js";
import { checkSequenceLength } from "../rollouts/runner.js";
import { ATTEMPT_OVER, RolloutInferenceClient } from "../rollouts/rollout-inference.js";
import { workerSettings } from "../recipe/settings.js";
import { isTaskPrompt, taskPrompt, type RolloutTask } from "../contracts/task.js";
import { InputError } from "../errors.js";
import { type BaseRolloutWorker } from "../contracts/rollout-worker.js";
import { ROLLOUT_SCOPE, type ScopedWorker } from "../contracts/worker.js";
import type { InferenceClient } from "../contracts/inference.js";
import { Trajectory, type TrajectoryInit } from "../contracts/trajectory.js";

export { seededRandom, workerSettings };

/** Options of {@link runRollout}. */
export interface RunRolloutOptions {
  /** What `this.inferenceClient` answers with during the rollout (default: none, which a worker that samples reports). */
  inferenceClient?: InferenceClient;
}

/**
 * Runs `worker.rollout(task)` once, as a training run would, and returns the trajectories it put
 * (with `putTrajectory`) followed by those it returned, each validated. As in a run, the worker's
 * `this.inferenceClient` samples with the recipe's `rollout_worker.temperature` and
 * `max_response_length` (from the worker's settings) and a seed derived from `task.seed`, unless
 * a call passes its own, and a trajectory longer than `max_sequence_length` is refused. Errors of
 * the worker propagate; `putTrajectory` after the rollout has ended throws, as in a run.
 *
 * @throws `TrajectoryError` for a trajectory that does not validate.
 * @throws `InputError` for a trajectory longer than `rollout_worker.max_sequence_length`.
 */
export async function runRollout(
  worker: BaseRolloutWorker,
  task: RolloutTask,
  options: RunRolloutOptions = {},
): Promise<Trajectory[]> {
  const put: Trajectory[] = [];
  const ended = new AbortController();
  const { temperature, maxResponseLength, maxSequenceLength } = worker.settings;
  (worker as ScopedWorker)[ROLLOUT_SCOPE] = {
    signal: ended.signal,
    inference:
      options.inferenceClient &&
      new RolloutInferenceClient(options.inferenceClient, deriveSeed(task.seed, 0), ended.signal, {
        temperature,
        maxTokens: maxResponseLength,
      }),
    put: (trajectory) => put.push(asTrajectory(trajectory)),
  };
  let result;
  try {
    result = await worker.rollout(task);
  } finally {
    // As in a run: the worker's putTrajectory and inferenceClient throw once the rollout is over.
    (worker as ScopedWorker)[ROLLOUT_SCOPE] = undefined;
    ended.abort(ATTEMPT_OVER);
  }
  const returned = result === undefined ? [] : Array.isArray(result) ? result : [result];
  return [...put, ...returned.map((value: Trajectory | TrajectoryInit) => asTrajectory(value))].map((t) => {
    t.validate();
    checkSequenceLength(t, maxSequenceLength);
    return t;
  });
}

/** A trajectory of this copy of nexrl from what a worker produced. */
function asTrajectory(value: Trajectory | TrajectoryInit): Trajectory {
  return value instanceof Trajectory ? value : new Trajectory({ ...value, extraFields: { ...value.extraFields } });
}

/**
 * A task for a test: the row `data` (its `prompt` field is the task's prompt unless `prompt` is
 * given), the first copy of a group of one, training (not validation), seed 0, unless `fields`
 * say otherwise.
 * @throws `InputError` when neither `fields.prompt` nor `data.prompt` is text or chat messages.
 */
export function rolloutTask(data: DataRow, fields: Partial<Omit<RolloutTask, "data">> = {}): RolloutTask {
  const prompt = fields.prompt ?? data["prompt"];
  if (!isTaskPrompt(prompt))
    throw new InputError(
      `rolloutTask: a task's prompt is text or a list of {role, content} chat messages; give it as data.prompt or fields.prompt (got ${JSON.stringify(prompt)?.slice(0, 80)})`,
    );
  return {
    data,
    prompt: taskPrompt(prompt),
    index: 0,
    epoch: 0,
    batchIndex: 0,
    groupId: "test-group",
    runId: 0,
    groupSize: 1,
    isVal: false,
    seed: 0,
    ...fields,
  };
}
