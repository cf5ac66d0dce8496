/**
 * {@link WeaverSamplingClient}: sampling, prompt logprobs and pause / continue on a Weaver
 * sampling session.
 *
 * @module
 */
import { modelInputFromTokens, type ModelInput } from "../../wire/wire.js";
import type { ApiFuture, SampleOutput, SamplingClient, SamplingParams } from "../../contracts/training.js";
import { submitOperation, type WeaverContext } from "./context.js";
import { readPromptLogprobs, readSample, weaverSamplingParams } from "./wire.js";
import { ConfigError } from "../../errors.js";

/** How a pause treats requests in flight; `abort` ends them with stop reason `abort`. */
export type PauseMode = "abort" | "retract" | "in_place";

/** Samples from one Weaver sampling session. */
export class WeaverSamplingClient implements SamplingClient {
  /**
   * Made by the service (`createTrainingClient` / `createSamplingClient`).
   * @internal
   * @param ctx the service connection.
   * @param modelPath the `weaver://` path or base model it samples.
   * @param sessionId the sampling session's id.
   * @param trainingMode the training mode of the model it samples, when known.
   */
  constructor(
    private readonly ctx: WeaverContext,
    readonly modelPath: string,
    readonly sessionId: string,
    readonly trainingMode: "lora" | "full_ft" | undefined,
  ) {}

  /** `POST /sampling-sessions/{id}/samples`; stops must be strings. A paused sampler answers `abort`. */
  async sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>> {
    const body = {
      prompt,
      sampling_params: weaverSamplingParams(params),
      num_samples: numSamples,
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
    };
    return submitOperation(this.ctx, this.path("samples"), body, readSample, "sample");
  }

  /** `POST /sampling-sessions/{id}/logprobs`: logprob of each token given the ones before it; index 0 is null. */
  async computeLogprobs(tokens: number[]): Promise<Array<number | null>> {
    const operation = await submitOperation(
      this.ctx,
      this.path("logprobs"),
      { prompt: modelInputFromTokens(tokens) },
      readPromptLogprobs,
      "compute_logprobs",
    );
    return operation.result();
  }

  /**
   * Pauses generation on the model's inference engine (`full_ft` models only): with `abort`,
   * requests in flight end with stop reason `abort`. Always resume with
   * {@link WeaverSamplingClient.continueGeneration} (in a `finally`): the service never resumes
   * by itself.
   * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a sampler of a LoRA model.
   */
  async pauseGeneration(mode: PauseMode = "abort"): Promise<void> {
    this.checkPausable("pauseGeneration");
    await this.ctx.http.request({
      method: "POST",
      path: this.path("pause-generation"),
      body: { mode },
      retry: "unsent",
    });
  }

  /** Resumes generation after {@link WeaverSamplingClient.pauseGeneration}. @throws {@link "nexrl/errors".ConfigError | ConfigError} for a LoRA model. */
  async continueGeneration(): Promise<void> {
    this.checkPausable("continueGeneration");
    await this.ctx.http.request({ method: "POST", path: this.path("continue-generation"), retry: "unsent" });
  }

  private checkPausable(what: string): void {
    if (this.trainingMode === "lora") {
      throw new ConfigError(
        `${what} applies only to full_ft models: a LoRA model shares its inference engine with other adapters, so Weaver cannot pause it; create the model with trainingMode "full_ft" to pause generation during weight swaps`,
      );
    }
  }

  private path(route: string): string {
    return `/api/v1/sampling-sessions/${encodeURIComponent(this.sessionId)}/${route}`;
  }
}
