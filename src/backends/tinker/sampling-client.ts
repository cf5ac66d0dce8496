/**
 * {@link TinkerSamplingClient}: `asample` and `compute_logprobs` on a Tinker sampling session.
 *
 * @module
 */
import { modelInputFromTokens, type ModelInput } from "../../wire/wire.js";
import type { ApiFuture, SampleOutput, SamplingClient, SamplingParams } from "../../contracts/training.js";
import { submitRequest, type TinkerContext } from "./context.js";
import { TinkerFuture } from "./future.js";
import { sampleResult } from "./proto-results.js";
import { Slots } from "./slots.js";
import { sampleBody } from "./wire.js";
import { UnexpectedResponseError } from "../../errors.js";

/**
 * Samples from one Tinker sampling session (a sampler snapshot or a base model). At most the
 * server's `sample_max_concurrent_requests` requests are in flight at once (submitted and not
 * yet answered); further calls wait for a slot.
 */
export class TinkerSamplingClient implements SamplingClient {
  private nextSeq = 0;
  private readonly slots: Slots;

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
  ) {
    this.slots = new Slots(ctx.negotiation.flags.sample_max_concurrent_requests);
  }

  /** `POST /api/v1/asample` with stop, seed, temperature, top_p and top_k. */
  async sample(prompt: ModelInput, numSamples: number, params: SamplingParams): Promise<ApiFuture<SampleOutput>> {
    return this.submit(sampleBody(this.sessionId, this.nextSeq++, prompt, numSamples, params, false), (body) => ({
      sequences: sampleResult(body).sequences,
    }));
  }

  /**
   * Logprob of each token given the ones before it (index 0 is null): an `asample` of one token
   * with `prompt_logprobs`, as the Tinker SDK's `compute_logprobs`.
   */
  async computeLogprobs(tokens: number[]): Promise<Array<number | null>> {
    const body = sampleBody(this.sessionId, this.nextSeq++, modelInputFromTokens(tokens), 1, { maxTokens: 1 }, true);
    const future = await this.submit(body, (answer) => {
      const { promptLogprobs } = sampleResult(answer);
      if (!promptLogprobs)
        throw new UnexpectedResponseError("the Tinker service answered compute_logprobs without prompt_logprobs");
      return promptLogprobs;
    });
    return future.result();
  }

  /**
   * Takes a slot, submits, and polls for the answer at once; the slot is given back when the
   * answer (or the failure) is in, whether or not the caller ever asks for it.
   */
  private async submit<T>(body: Record<string, unknown>, read: (body: unknown) => T): Promise<ApiFuture<T>> {
    const send = (): Promise<string> =>
      submitRequest(this.ctx, "asample", { body }, "Sample", { "X-Tinker-Sampling-Backpressure": "1" });
    await this.slots.acquire();
    let result: Promise<T>;
    try {
      const future = new TinkerFuture(
        this.ctx,
        await send(),
        send,
        read,
        `asample (seq_id ${String(body.seq_id)})`,
        this.ctx.negotiation.accept,
      );
      result = future.result();
    } catch (error) {
      this.slots.release();
      throw error;
    }
    const release = (): void => this.slots.release();
    result.then(release, release);
    return { result: () => result };
  }
}
