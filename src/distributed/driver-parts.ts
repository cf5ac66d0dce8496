/**
 * The distributed parts of a run (`rollout_worker.distributed`): the Redis queue, the inference
 * relay the workers sample from, and the `workers/*` metrics of each step.
 * @module
 */
import type { DistributedOptions } from "../recipe/schema/rollout-worker.js";
import type { InferenceClient } from "../contracts/inference.js";
import type { RunFingerprint, TaskSampling } from "./messages.js";
import type { RemoteAttempts } from "../rollouts/runner.js";
import { RedisRollouts } from "./driver.js";
import { InferenceRelay } from "./inference-relay.js";
import type { DistributedError } from "../errors.js";

/** What a distributed run holds besides the in-process parts. */
export class DistributedRun {
  private constructor(
    private readonly rollouts: RedisRollouts,
    private readonly relay: InferenceRelay | undefined,
    private readonly sampling: TaskSampling,
  ) {}

  /**
   * Connects to Redis and, when rollouts sample, starts the relay of `inference`.
   * @param onError told of connection trouble after the start.
   * @param sampling the recipe's sampling settings, sent with every task (workers use them).
   * @param fingerprint the recipe's fingerprint, published for the workers to check theirs against.
   */
  static async open(
    settings: DistributedOptions,
    inference: InferenceClient | undefined,
    onError: (error: DistributedError) => void,
    sampling: TaskSampling,
    fingerprint: RunFingerprint,
  ): Promise<DistributedRun> {
    const rollouts = await RedisRollouts.open(settings, onError, fingerprint);
    try {
      const relay = inference && (await InferenceRelay.start(inference, settings.inference));
      return new DistributedRun(rollouts, relay, sampling);
    } catch (error) {
      await rollouts.close();
      throw error;
    }
  }

  /** The remote attempts of the training runner (`sample`: its rollouts may sample). */
  training(sample: boolean): RemoteAttempts {
    return this.rollouts.attempts("train", sample ? this.relay?.target : undefined, this.sampling);
  }

  /** The remote attempts of the validation runner. */
  validation(): RemoteAttempts {
    return this.rollouts.attempts("validation", this.relay?.target, this.sampling);
  }

  /**
   * The step's `workers/*` metrics: workers alive now, and since the last call (this step) the
   * attempts the workers finished and failed (counted from the results read, so a result that
   * came in is in the step it came in), the tasks reclaimed, the duplicate results ignored, and
   * the messages moved to the dead-letter stream.
   */
  async metrics(): Promise<Record<string, number>> {
    const workers = await this.rollouts.workers();
    const counts = this.rollouts.takeCounts();
    const deadLetters = await this.rollouts.takeDeadLetters();
    return {
      "workers/alive": workers.length,
      "workers/tasks": counts.tasks,
      "workers/failures": counts.failures,
      "workers/reclaimed": counts.reclaimed,
      "workers/duplicates": counts.duplicates,
      "workers/dead_letters": deadLetters,
    };
  }

  /** Resolves once `signal` has aborted while tasks wait and no worker is connected (see {@link RedisRollouts.stranded}). */
  stranded(signal: AbortSignal): Promise<void> {
    return this.rollouts.stranded(signal);
  }

  /** Disconnects and stops the relay. */
  async close(): Promise<void> {
    await this.rollouts.close();
    await this.relay?.close();
  }
}
