/**
 * {@link SequencedTrainingClient}: what the Tinker and Weaver training clients share. Remote
 * services run a model's operations in `seq_id` order, so each operation takes the next
 * `seq_id` when it is called and submissions go out strictly in call order; a caller may submit
 * `forwardBackward` and `optimStep` back to back and await both later.
 *
 * @module
 */
import { SubmitOrder } from "../../http/submit-order.js";
import type { LossFunctionName } from "../../contracts/losses.js";
import type { ForwardBackwardOutput } from "../../wire/results.js";
import type { Datum } from "../../wire/wire.js";
import { forwardBackwardCustom } from "../custom-loss.js";
import type { CustomLossFn } from "../../contracts/training.js";
import type { ApiFuture } from "../../contracts/training.js";

/** A loss pass to send: `forward` computes no gradients, `forward_backward` accumulates them. */
export interface LossPass {
  /** Which pass. */
  kind: "forward" | "forward_backward";
  /** The datums. */
  data: Datum[];
  /** The loss function. */
  lossFn: LossFunctionName;
  /** Overrides of the loss's config defaults. */
  config: Record<string, number> | undefined;
}

/** The sequencing of a remote model's operations; a subclass says how each is sent. */
export abstract class SequencedTrainingClient<C> {
  private nextSeq = 1;
  private readonly order = new SubmitOrder();

  /** The service connection. @internal */
  protected readonly ctx: C;
  /** The model id on the service. */
  readonly modelId: string;
  /** The base model it was created from. @internal */
  protected readonly baseModel: string;

  /**
   * Made by the service (`createTrainingClient`).
   * @internal
   * @param ctx the service connection.
   * @param modelId the model id on the service.
   * @param baseModel the base model it was created from.
   */
  constructor(ctx: C, modelId: string, baseModel: string) {
    this.ctx = ctx;
    this.modelId = modelId;
    this.baseModel = baseModel;
  }

  // Both are async so that a pass refused before sending rejects instead of throwing.
  /** Loss and target logprobs without touching gradients. */
  async forward(data: Datum[], lossFn: LossFunctionName, lossFnConfig?: Record<string, number>) {
    return this.lossPass({ kind: "forward", data, lossFn, config: lossFnConfig });
  }

  /** Loss, target logprobs and gradients, accumulated until the next `optimStep`. */
  async forwardBackward(data: Datum[], lossFn: LossFunctionName, lossFnConfig?: Record<string, number>) {
    return this.lossPass({ kind: "forward_backward", data, lossFn, config: lossFnConfig });
  }

  /**
   * A loss written in TypeScript: `forward`, the loss and its gradient here, then a
   * `cross_entropy` surrogate pass (see {@link forwardBackwardCustom}). Resolves once the
   * gradient pass is submitted.
   */
  async forwardBackwardCustom(data: Datum[], lossFn: CustomLossFn): Promise<ApiFuture<ForwardBackwardOutput>> {
    return forwardBackwardCustom(this, data, lossFn);
  }

  /** Checks and sends a loss pass, with the `seq_id`s it takes from `takeSeqs`. @internal */
  protected abstract lossPass(pass: LossPass): Promise<ApiFuture<ForwardBackwardOutput>>;

  /** The next `count` `seq_id`s, taken now so that the service's order is the order of the calls. @internal */
  protected takeSeqs(count: number): number[] {
    const first = this.nextSeq;
    this.nextSeq += count;
    return Array.from({ length: count }, (_, i) => first + i);
  }

  /** Runs `submit` once every earlier submission of this model has gone out. @internal */
  protected inOrder<T>(what: string, submit: () => Promise<T>): Promise<T> {
    return this.order.run(what, submit);
  }

  /**
   * An operation with the next `seq_id`: its body is built now and sent after every earlier
   * submission; `what` (`optim_step (seq_id 3)`) names it in errors.
   * @internal
   */
  protected sequenced<T>(
    kind: string,
    build: (seq: number) => Record<string, unknown>,
    submit: (body: Record<string, unknown>, what: string) => Promise<ApiFuture<T>>,
  ): Promise<ApiFuture<T>> {
    const [seq] = this.takeSeqs(1);
    const body = build(seq!);
    const what = `${kind} (seq_id ${seq})`;
    return this.inOrder(what, () => submit(body, what));
  }
}
