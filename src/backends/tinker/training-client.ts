/**
 * {@link TinkerTrainingClient}: a Tinker model's training operations, each with the next
 * `seq_id` and submitted strictly in call order.
 *
 * @module
 */
import type { ForwardBackwardOutput, OptimStepOutput } from "../../wire/results.js";
import { zstdCompress } from "../../wire/tinker-proto/zstd.js";
import { adamParams, adamParamsToWire, type AdamParams } from "../../wire/wire.js";
import { SequencedTrainingClient, type LossPass } from "../remote/training-client.js";
import type { ApiFuture, ModelInfo, SavedPath, SaveStateOptions, TrainingClient } from "../../contracts/training.js";
import { chunkBySize, combineChunks } from "./chunks.js";
import { submitRequest, type TinkerContext } from "./context.js";
import { TinkerFuture } from "./future.js";
import { checkDatums, lossBody } from "./loss-body.js";
import { protoLossBody } from "./proto-body.js";
import { forwardBackwardResult } from "./proto-results.js";
import { readOptimStep, readPath } from "./wire.js";

/**
 * Trains one Tinker model. Every operation takes the next `seq_id` (from 1) when it is called;
 * submissions go out one after another in that order, and the service runs them in `seq_id`
 * order, so `forwardBackward` and `optimStep` may be submitted back to back and awaited later.
 *
 * Loss passes (`POST /api/v1/forward_backward`, JSON or protobuf as negotiated; `forward` is JSON
 * `POST /api/v1/forward`, or in the protobuf generation `forward_backward` with `forward_only`)
 * drop `mask` and `loss_mask` inputs (Tinker rejects them), are checked against the loss
 * contract before anything is sent, and go in chunks of consecutive `seq_id`s when large.
 */
export class TinkerTrainingClient extends SequencedTrainingClient<TinkerContext> implements TrainingClient {
  /** Applies the accumulated gradients (`POST /api/v1/optim_step`). */
  async optimStep(params: AdamParams): Promise<ApiFuture<OptimStepOutput>> {
    const adam_params = adamParamsToWire(adamParams(params));
    return this.sequenced(
      "optim_step",
      (seq) => ({ adam_params, model_id: this.modelId, seq_id: seq, type: "optim_step" }),
      this.future("optim_step", "OptimStep", readOptimStep),
    );
  }

  /**
   * Saves weights and optimizer state (`POST /api/v1/save_weights`; Tinker always keeps both, so
   * either `kind` can resume) as `tinker://<model>/weights/<name>`, replacing an earlier
   * checkpoint of that name as the local backend does. The `json` wire speaks 0.18.2's schema,
   * which has no `overwrite` (it came with 0.20), so there the server's own rule for a taken
   * name applies.
   */
  async saveState(name: string, options: SaveStateOptions): Promise<ApiFuture<SavedPath>> {
    return this.sequenced(
      "save_weights",
      (seq) => ({
        model_id: this.modelId,
        path: name,
        seq_id: seq,
        ...(options.ttlSeconds !== undefined && { ttl_seconds: options.ttlSeconds }),
        ...(this.ctx.negotiation.wire !== "json" && { overwrite: true }),
        type: "save_weights",
      }),
      this.future("save_weights", "SaveWeights", (body) => readPath(body, "save_weights")),
    );
  }

  /** Restores a `tinker://…/weights/…` checkpoint (`POST /api/v1/load_weights`). */
  async loadState(path: string, options: { optimizer: boolean }): Promise<ApiFuture<void>> {
    return this.sequenced(
      "load_weights",
      (seq) => ({ model_id: this.modelId, seq_id: seq, path, optimizer: options.optimizer, type: "load_weights" }),
      this.future("load_weights", "LoadWeights", () => undefined),
    );
  }

  /** Snapshots the weights for sampling as `tinker://<model>/sampler_weights/<name>`. */
  async saveWeightsForSampler(name: string, options: { ttlSeconds?: number } = {}): Promise<ApiFuture<SavedPath>> {
    return this.sequenced(
      "save_weights_for_sampler",
      (seq) => ({
        model_id: this.modelId,
        path: name,
        seq_id: seq,
        ...(options.ttlSeconds !== undefined && { ttl_seconds: options.ttlSeconds }),
        type: "save_weights_for_sampler",
      }),
      this.future("save_weights_for_sampler", "SaveWeightsForSampler", (body) =>
        readPath(body, "save_weights_for_sampler"),
      ),
    );
  }

  /** `POST /api/v1/get_info`, with the context length from `get_server_capabilities`. */
  async getInfo(): Promise<ModelInfo> {
    const { body } = await this.ctx.request<Record<string, unknown>>({
      method: "POST",
      path: "/api/v1/get_info",
      body: { model_id: this.modelId, type: "get_info" },
      retry: "all",
    });
    const data = (body.model_data ?? {}) as Record<string, unknown>;
    const baseModel =
      typeof data.model_name === "string"
        ? data.model_name
        : typeof body.model_name === "string"
          ? body.model_name
          : this.baseModel;
    const { body: capabilities } = await this.ctx.request<{
      supported_models?: Array<{ model_name?: string; max_context_length?: number }>;
    }>({ method: "GET", path: "/api/v1/get_server_capabilities" });
    const contextLength = capabilities.supported_models?.find((m) => m.model_name === baseModel)?.max_context_length;
    return {
      modelId: this.modelId,
      baseModel,
      ...(typeof body.lora_rank === "number" && { loraRank: body.lora_rank }),
      ...(typeof data.tokenizer_id === "string" && { tokenizerId: data.tokenizer_id.split(":")[0]! }),
      ...(contextLength !== undefined && { contextLength }),
    };
  }

  /** Sends an operation's body to `endpoint` and polls for its answer (resubmitting the same body after a 410). */
  private future<T>(endpoint: string, requestType: string, read: (body: unknown) => T) {
    return async (body: Record<string, unknown>, what: string): Promise<ApiFuture<T>> => {
      const send = (): Promise<string> => submitRequest(this.ctx, endpoint, { body }, requestType);
      return new TinkerFuture(this.ctx, await send(), send, read, what);
    };
  }

  protected lossPass({ kind, data, lossFn, config }: LossPass): Promise<ApiFuture<ForwardBackwardOutput>> {
    const { negotiation } = this.ctx;
    const forwardOnly = kind === "forward";
    const proto = forwardOnly ? negotiation.forward === "forward_only" : negotiation.forwardBackward === "protobuf";
    const endpoint = proto ? "forward_backward" : kind;
    const requestType = forwardOnly ? "Forward" : "ForwardBackward";
    const checked = checkDatums(data, lossFn, config);
    const chunks = chunkBySize(checked, (d) => (proto ? d.protoBytes : d.bytes), this.ctx.limits);
    const seqs = this.takeSeqs(chunks.length);
    const inputKey = forwardOnly ? "forward_input" : "forward_backward_input";
    // Serialised once: a retry or a resubmission (after a 410) sends the same bytes.
    const bodies: Array<string | Uint8Array> = chunks.map((chunk, i) =>
      proto
        ? protoLossBody(chunk, lossFn, config, this.modelId, seqs[i]!, forwardOnly)
        : lossBody(inputKey, chunk, lossFn, config, this.modelId, seqs[i]!),
    );
    const headers: Record<string, string> = proto
      ? { "content-type": "application/x-protobuf", ...(negotiation.compressed && { "content-encoding": "zstd" }) }
      : {};
    const what = `${endpoint}${forwardOnly && proto ? " forward_only" : ""} (seq_id ${seqs[0]}${seqs.length > 1 ? `–${seqs.at(-1)}` : ""})`;
    return this.inOrder(what, async () => {
      const sent = negotiation.compressed
        ? await Promise.all(bodies.map((body) => zstdCompress(typeof body === "string" ? Buffer.from(body) : body)))
        : bodies;
      const senders = sent.map(
        (encodedBody) => (): Promise<string> =>
          submitRequest(this.ctx, endpoint, { encodedBody }, requestType, headers),
      );
      let ids: string[];
      if (negotiation.flags.parallel_fwdbwd_chunks) {
        // Like the Tinker SDK: later chunks first, in parallel, then the first, which the service
        // waits for before running any of them.
        const later = await Promise.all(senders.slice(1).map((send) => send()));
        ids = [await senders[0]!(), ...later];
      } else {
        ids = [];
        for (const send of senders) ids.push(await send());
      }
      const futures = ids.map(
        (id, i) =>
          new TinkerFuture(
            this.ctx,
            id,
            senders[i]!,
            forwardBackwardResult,
            `${endpoint} (seq_id ${seqs[i]})`,
            negotiation.accept,
          ),
      );
      let combined: Promise<ForwardBackwardOutput> | undefined;
      return { result: () => (combined ??= Promise.all(futures.map((f) => f.result())).then(combineChunks)) };
    });
  }
}
