/**
 * Timed fakes of the training-service interfaces for the overlap row: sampling a rollout takes
 * `rolloutMs`, a `forwardBackward` takes `trainMs`, everything else answers at once.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type {
  ApiFuture,
  ForwardBackwardOutput,
  ModelInfo,
  OptimStepOutput,
  SampleOutput,
  SamplingClient,
  SavedPath,
  TrainingClient,
  TrainingService,
} from "../../dist/contracts/training.js";
import type { Datum } from "../../dist/wire/wire.js";

/** Milliseconds each fake takes. */
export interface FakeTimes {
  /** One sampling request (all rollouts of a batch run at once, so also the batch). */
  rolloutMs: number;
  /** One `forwardBackward` (the training step). */
  trainMs: number;
}

/** The answer of every sample: token ids of the byte tokenizer's `a`..`p`, which the worker scores. */
const SAMPLED = Array.from({ length: 16 }, (_, i) => 97 + i);

const done = <T>(value: T): ApiFuture<T> => ({ result: () => Promise.resolve(value) });
const after = <T>(ms: number, value: () => T): ApiFuture<T> => {
  const answer = sleep(ms).then(value);
  return { result: () => answer };
};

class FakeSamplingClient implements SamplingClient {
  constructor(
    readonly modelPath: string,
    private readonly times: FakeTimes,
  ) {}

  async sample(): Promise<ApiFuture<SampleOutput>> {
    return after(this.times.rolloutMs, () => ({
      sequences: [{ tokens: [...SAMPLED], logprobs: SAMPLED.map(() => -0.5), stopReason: "stop" as const }],
    }));
  }

  async computeLogprobs(): Promise<Array<number | null>> {
    throw new Error("the overlap benchmark's sampler computes no logprobs");
  }
}

class FakeTrainingClient implements TrainingClient {
  readonly modelId = "fake-model";

  constructor(private readonly times: FakeTimes) {}

  async forward(): Promise<ApiFuture<ForwardBackwardOutput>> {
    throw new Error("the overlap benchmark's trajectories carry sampler logprobs; forward is never needed");
  }

  async forwardBackward(data: Datum[]): Promise<ApiFuture<ForwardBackwardOutput>> {
    const lossFnOutputs = data.map((d) => ({ logprobs: d.loss_fn_inputs.target_tokens!.data.map(() => -0.5) }));
    return after(this.times.trainMs, () => ({ lossFnOutputs, metrics: { "loss:sum": 0 } }));
  }

  async forwardBackwardCustom(): Promise<ApiFuture<ForwardBackwardOutput>> {
    throw new Error("the overlap benchmark's trainers use built-in losses; forwardBackwardCustom is never needed");
  }

  async optimStep(): Promise<ApiFuture<OptimStepOutput>> {
    return done({ metrics: {} });
  }

  async saveState(name: string): Promise<ApiFuture<SavedPath>> {
    return done({ path: `fake://state/${name}` });
  }

  async loadState(): Promise<ApiFuture<void>> {
    return done(undefined);
  }

  async saveWeightsForSampler(name: string): Promise<ApiFuture<SavedPath>> {
    return done({ path: `fake://sampler/${name}` });
  }

  async getInfo(): Promise<ModelInfo> {
    return { modelId: this.modelId, baseModel: "tiny", contextLength: 4096 };
  }
}

/** A training service whose samplers and training steps take the given times (it reports the `local` backend the recipe names). */
export class FakeTrainingService implements TrainingService {
  readonly backend = "local" as const;

  constructor(private readonly times: FakeTimes) {}

  async connect(): Promise<void> {}

  async createTrainingClient(): Promise<TrainingClient> {
    return new FakeTrainingClient(this.times);
  }

  async createSamplingClient(path: string): Promise<SamplingClient> {
    return new FakeSamplingClient(path, this.times);
  }

  async close(): Promise<void> {}
}
