/**
 * {@link WeaverTrainingClient}: a Weaver model's operations — loss passes, optimizer steps and
 * sampler exports numbered by `seq_id`, checkpoints and loads after everything before them.
 *
 * @module
 */
import { SubmitOrder } from "../../../http/submit-order.js";
import type { LossFunctionName } from "../../../types/losses.js";
import { adamParams, type AdamParams, type Datum } from "../../../types/wire.js";
import type {
  ApiFuture,
  ForwardBackwardOutput,
  ModelInfo,
  OptimStepOutput,
  SavedPath,
  SaveStateOptions,
  TrainingClient,
} from "../types.js";
import { submitOperation, type WeaverContext } from "./context.js";
import { field, stringField } from "./fields.js";
import type { WeaverOperation } from "./operation.js";
import { readLossPass, readOptimStep, weaverDatums } from "./wire.js";

/** Weaver checkpoint types: weights, weights and optimizer (for resuming), or a sampling checkpoint. */
export type WeaverCheckpointType = "weight" | "weight_and_optimizer" | "sampling";

/** Default TTL of sampler exports in seconds (Weaver's `DEFAULT_SAMPLER_TTL_SECONDS`). */
export const DEFAULT_SAMPLER_TTL_SECONDS = 3600;

/**
 * Trains one Weaver model. Loss passes, optimizer steps and sampler exports take the next
 * `seq_id` (from 1) and are submitted strictly in call order; checkpoints and loads carry no
 * `seq_id`, so they are submitted once every earlier operation has finished.
 */
export class WeaverTrainingClient implements TrainingClient {
  private nextSeq = 1;
  private readonly order = new SubmitOrder();
  /** The latest operation submitted: the service runs a model's operations in order, so once it has finished, all have. */
  private latest: WeaverOperation<unknown> | undefined;

  /**
   * Made by the service (`createTrainingClient` / `createSamplingClient`).
   * @internal
   * @param ctx the service connection.
   * @param modelId the model id.
   * @param baseModel the base model it was created from.
   * @param trainingMode `lora` or `full_ft`.
   */
  constructor(
    private readonly ctx: WeaverContext,
    readonly modelId: string,
    private readonly baseModel: string,
    readonly trainingMode: "lora" | "full_ft",
  ) {}

  /** Loss and logprobs without gradients (`POST /models/{id}/forward-passes`). */
  async forward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>> {
    return this.lossPass("forward-passes", "forward_input", data, lossFn, lossFnConfig);
  }

  /**
   * Loss, logprobs and accumulated gradients (`POST /models/{id}/forward-backward-passes`).
   * `importance_sampling` datums without `loss_mask` get one (1 where the advantage is not 0).
   */
  async forwardBackward(
    data: Datum[],
    lossFn: LossFunctionName,
    lossFnConfig?: Record<string, number>,
  ): Promise<ApiFuture<ForwardBackwardOutput>> {
    return this.lossPass("forward-backward-passes", "forward_backward_input", data, lossFn, lossFnConfig);
  }

  /** Applies the accumulated gradients (`POST /models/{id}/optimizer-steps`). */
  async optimStep(params: AdamParams): Promise<ApiFuture<OptimStepOutput>> {
    const adam_params = adamParams(params);
    return this.sequenced(
      "optimizer-steps",
      "optim_step",
      (seq) => ({ payload: { model_id: this.modelId, seq_id: seq, adam_params } }),
      readOptimStep,
    );
  }

  /** Saves a `weight` or `weight_and_optimizer` checkpoint named `name` (see {@link WeaverTrainingClient.saveCheckpoint}). */
  async saveState(name: string, options: SaveStateOptions): Promise<ApiFuture<SavedPath>> {
    return this.saveCheckpoint(name, {
      type: options.kind === "weights" ? "weight" : "weight_and_optimizer",
      ...(options.ttlSeconds !== undefined && { ttlSeconds: options.ttlSeconds }),
    });
  }

  /**
   * Saves a checkpoint (`POST /models/{id}/checkpoints`) at `weaver://<model>/checkpoints/<name>`:
   * `weight` (kept), `weight_and_optimizer` (to resume exactly) or `sampling` (expires after an
   * hour unless `ttlSeconds` says otherwise).
   */
  async saveCheckpoint(
    name: string,
    options: { type: WeaverCheckpointType; ttlSeconds?: number },
  ): Promise<ApiFuture<SavedPath>> {
    const body = {
      type: options.type,
      name,
      ...(options.ttlSeconds !== undefined && { ttl_seconds: options.ttlSeconds }),
    };
    return this.afterEarlier(`checkpoint ${name}`, "checkpoints", body, (response) => ({
      path: stringField(response, "path", "checkpoint"),
    }));
  }

  /** Restores a checkpoint (`POST /models/{id}/load`), with the optimizer state when `optimizer`. */
  async loadState(path: string, options: { optimizer: boolean }): Promise<ApiFuture<void>> {
    return this.afterEarlier(`load ${path}`, "load", { path, include_optimizer: options.optimizer }, () => undefined);
  }

  /**
   * Exports the weights for sampling (`POST /models/{id}/export-sampler`). The export expires
   * after `ttlSeconds` (default 3600); `null` keeps it.
   */
  async saveWeightsForSampler(
    name: string,
    options: { ttlSeconds?: number | null } = {},
  ): Promise<ApiFuture<SavedPath>> {
    const ttl_seconds = options.ttlSeconds === undefined ? DEFAULT_SAMPLER_TTL_SECONDS : options.ttlSeconds;
    return this.sequenced(
      "export-sampler",
      "export_sampler",
      // A null TTL (keep the export) is sent as no ttl_seconds, as the Weaver SDK does.
      (seq) => ({ seq_id: seq, path: name, ...(ttl_seconds !== null && { ttl_seconds }) }),
      (response) => {
        const path = field(response, "model_path") ?? field(response, "path");
        return { path: typeof path === "string" ? path : stringField(response, "model_path", "export-sampler") };
      },
    );
  }

  /** `GET /models/{id}`. */
  async getInfo(): Promise<ModelInfo> {
    const { body } = await this.ctx.http.request({
      method: "GET",
      path: `/api/v1/models/${encodeURIComponent(this.modelId)}`,
    });
    const rank = field(field(body, "lora_config"), "rank");
    const tokenizer = field(body, "tokenizer_path");
    const context = field(body, "max_context_length");
    const base = field(body, "base_model");
    return {
      modelId: this.modelId,
      baseModel: typeof base === "string" ? base : this.baseModel,
      ...(typeof rank === "number" && { loraRank: rank }),
      ...(typeof tokenizer === "string" && { tokenizerId: tokenizer }),
      ...(typeof context === "number" && { contextLength: context }),
    };
  }

  private modelPath(route: string): string {
    return `/api/v1/models/${encodeURIComponent(this.modelId)}/${route}`;
  }

  private sequenced<T>(
    route: string,
    kind: string,
    build: (seq: number) => Record<string, unknown>,
    read: (response: unknown) => T,
  ): Promise<ApiFuture<T>> {
    const seq = this.nextSeq++;
    const what = `${kind} (seq_id ${seq})`;
    const body = build(seq);
    return this.order.run(what, async () => {
      const operation = await submitOperation(this.ctx, this.modelPath(route), body, read, what);
      this.latest = operation;
      return operation;
    });
  }

  private afterEarlier<T>(
    what: string,
    route: string,
    body: Record<string, unknown>,
    read: (response: unknown) => T,
  ): Promise<ApiFuture<T>> {
    return this.order.run(what, async () => {
      await this.latest?.result().catch(() => undefined);
      const operation = await submitOperation(this.ctx, this.modelPath(route), body, read, what);
      this.latest = operation;
      return operation;
    });
  }

  private lossPass(
    route: "forward-passes" | "forward-backward-passes",
    inputKey: "forward_input" | "forward_backward_input",
    data: Datum[],
    lossFn: LossFunctionName,
    config: Record<string, number> | undefined,
  ): Promise<ApiFuture<ForwardBackwardOutput>> {
    const datums = weaverDatums(data, lossFn);
    const kind = inputKey === "forward_input" ? "forward" : "forward_backward";
    return this.sequenced(
      route,
      kind,
      (seq) => ({
        payload: {
          model_id: this.modelId,
          seq_id: seq,
          [inputKey]: { loss_fn: lossFn, data: datums, ...(config && { loss_fn_config: config }) },
        },
      }),
      readLossPass,
    );
  }
}
