/**
 * {@link TinkerSamplingClient}: `asample` and `compute_logprobs` on a Tinker sampling session.
 *
 * @module
 */
import { modelInputFromTokens, type ModelInput } from "../../../types/wire.js";
import type { ApiFuture, SampleOutput, SamplingClient, SamplingParams } from "../types.js";
import { submitRequest, type TinkerContext } from "./context.js";
import { TinkerFuture } from "./future.js";
import { readSample, sampleBody, TinkerResponseError } from "./wire.js";

/** Samples from one Tinker sampling session (a sampler snapshot or a base model). */
export class TinkerSamplingClient implements SamplingClient {
  private nextSeq = 0;

  /**
   * Made by the service (`createTrainingClient` / `createSamplingClient`).
   * @internal
   * @param ctx the service connection.
   * @param modelPath the `tinker://` path or base model it samples.
   * @param sessionId the `sampling_session_id`.
   */
  constructor(
    private readonly ctx: TinkerContext,
    readonly modelPath: string,
    private readonly sessionId: string,
  ) {}

  /** `POST /api/v1/asample` with stop, seed, temperature, top_p and top_k. */
  async sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>> {
    return this.submit(sampleBody(this.sessionId, this.nextSeq++, prompt, numSamples, params, false), (body) => ({
      sequences: readSample(body).sequences,
    }));
  }

  /**
   * Logprob of each token given the ones before it (index 0 is null): an `asample` of one token
   * with `prompt_logprobs`, as the Tinker SDK's `compute_logprobs`.
   */
  async computeLogprobs(tokens: number[]): Promise<Array<number | null>> {
    const body = sampleBody(this.sessionId, this.nextSeq++, modelInputFromTokens(tokens), 1, { maxTokens: 1 }, true);
    const future = await this.submit(body, (answer) => {
      const { promptLogprobs } = readSample(answer);
      if (!promptLogprobs)
        throw new TinkerResponseError("the Tinker service answered compute_logprobs without prompt_logprobs");
      return promptLogprobs;
    });
    return future.result();
  }

  private async submit<T>(body: Record<string, unknown>, read: (body: unknown) => T): Promise<ApiFuture<T>> {
    const send = (): Promise<string> =>
      submitRequest(this.ctx, "asample", { body }, "Sample", { "X-Tinker-Sampling-Backpressure": "1" });
    return new TinkerFuture(this.ctx, await send(), send, read, `asample (seq_id ${String(body.seq_id)})`);
  }
}
