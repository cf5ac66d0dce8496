/**
 * {@link WeaverTrainingClient}: a Weaver model's operations — loss passes, optimizer steps and
 * sampler exports numbered by `seq_id`, checkpoints and loads after everything before them.
 *
 * @module
 */
import type { ForwardBackwardOutput, OptimStepOutput } from "../../wire/results.js";
import { adamParams, adamParamsToWire, type AdamParams } from "../../wire/wire.js";
import { SequencedTrainingClient, type LossPass } from "../remote/training-client.js";
import type { ApiFuture, ModelInfo, SavedPath, SaveStateOptions, TrainingClient } from "../../contracts/training.js";
import { submitOperation, type WeaverContext } from "./context.js";
import { field, stringField } from "./fields.js";
import type { WeaverOperation } from "./operation.js";
import { readLossPass, readOptimStep, weaverDatums } from "./wire.js";

/** Weaver checkpoint types: weights, weights and optimizer (for resuming), or a sampling checkpoint. */
export type WeaverCheckpointType = "weight" | "weight_and_optimizer" | "sampling";

/** Default TTL of sampler exports in seconds (Weaver's `DEFAULT_SAMPLER_TTL_SECONDS`). */
export const DEFAULT_SAMPLER_TTL_SECONDS = 3600;

/**
 * Trains one Weaver model. Loss passes (`POST /models/{id}/forward-passes` and
 * `forward-backward-passes`; `importance_sampling` datums without `loss_mask` get one, 1 where
 * the advantage is not 0), optimizer steps and sampler exports take the next `seq_id` (from 1)
 * and are submitted strictly in call order; checkpoints and loads carry no `seq_id`, so they are
 * submitted once every earlier operation has finished.
 */
export class WeaverTrainingClient extends SequencedTrainingClient<WeaverContext> implements TrainingClient {
  /** The latest operation submitted: the service runs a model's operations in order, so once it has finished, all have. */
  private latest: WeaverOperation<unknown> | undefined;

  /**
   * Made by the service (`createTrainingClient`).
   * @internal
   * @param ctx the service connection.
   * @param modelId the model id.
   * @param baseModel the base model it was created from.
   * @param trainingMode `lora` or `full_ft`.
   */
  constructor(
    ctx: WeaverContext,
    modelId: string,
    baseModel: string,
    readonly trainingMode: "lora" | "full_ft",
  ) {
    super(ctx, modelId, baseModel);
  }

  /** Applies the accumulated gradients (`POST /models/{id}/optimizer-steps`). */
  async optimStep(params: AdamParams): Promise<ApiFuture<OptimStepOutput>> {
    const adam_params = adamParamsToWire(adamParams(params));
    return this.sequenced(
      "optim_step",
      (seq) => ({ payload: { model_id: this.modelId, seq_id: seq, adam_params } }),
      this.submitTo("optimizer-steps", readOptimStep),
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
      "export_sampler",
      // A null TTL (keep the export) is sent as no ttl_seconds, as the Weaver SDK does.
      (seq) => ({ seq_id: seq, path: name, ...(ttl_seconds !== null && { ttl_seconds }) }),
      this.submitTo("export-sampler", (response) => {
        const path = field(response, "model_path") ?? field(response, "path");
        return { path: typeof path === "string" ? path : stringField(response, "model_path", "export-sampler") };
      }),
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

  /** Submits an operation's body to `route`, remembering it as the latest. */
  private submitTo<T>(route: string, read: (response: unknown) => T) {
    return async (body: Record<string, unknown>, what: string): Promise<WeaverOperation<T>> => {
      const operation = await submitOperation(this.ctx, this.modelPath(route), body, read, what);
      this.latest = operation;
      return operation;
    };
  }

  /** Submits an operation without a `seq_id` once every earlier one has finished. */
  private afterEarlier<T>(
    what: string,
    route: string,
    body: Record<string, unknown>,
    read: (response: unknown) => T,
  ): Promise<ApiFuture<T>> {
    return this.inOrder(what, async () => {
      await this.latest?.result().catch(() => undefined);
      return this.submitTo(route, read)(body, what);
    });
  }

  protected lossPass({ kind, data, lossFn, config }: LossPass): Promise<ApiFuture<ForwardBackwardOutput>> {
    const datums = weaverDatums(data, lossFn);
    const inputKey = kind === "forward" ? "forward_input" : "forward_backward_input";
    return this.sequenced(
      kind,
      (seq) => ({
        payload: {
          model_id: this.modelId,
          seq_id: seq,
          [inputKey]: { loss_fn: lossFn, data: datums, ...(config && { loss_fn_config: config }) },
        },
      }),
      this.submitTo(kind === "forward" ? "forward-passes" : "forward-backward-passes", readLossPass),
    );
  }
}
