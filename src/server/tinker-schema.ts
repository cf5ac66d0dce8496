/**
 * The request bodies of the Tinker JSON protocol (wire-protocols §1.4), as strict zod schemas:
 * like Tinker, the server rejects unknown fields, so a client that sends a wrong name fails
 * loudly here.
 *
 * @module
 */
import { z } from "zod";

const int = z.int();
const tensorData = z.strictObject({
  data: z.array(z.number()),
  dtype: z.enum(["int64", "float32"]),
  shape: z.array(int).optional(),
  sparse_crow_indices: z.array(int).optional(),
  sparse_col_indices: z.array(int).optional(),
});
const format = z.enum(["png", "jpeg"]);
const chunk = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("encoded_text"), tokens: z.array(int) }),
  z.strictObject({ type: z.literal("image"), data: z.string(), format, expected_tokens: int.optional() }),
  z.strictObject({
    type: z.literal("image_asset_pointer"),
    location: z.string(),
    format,
    expected_tokens: int.optional(),
  }),
]);
const modelInput = z.strictObject({ chunks: z.array(chunk) });
const datum = z.strictObject({ model_input: modelInput, loss_fn_inputs: z.record(z.string(), tensorData) });
const lossInput = z.strictObject({
  data: z.array(datum),
  loss_fn: z.string(),
  loss_fn_config: z.record(z.string(), z.number()).optional(),
});
/** Free-form metadata a client may attach (Tinker and Weaver). */
export const metadata = z.record(z.string(), z.unknown());
/** `adam_params` of an optimizer step (Tinker and Weaver). */
export const adamParams = z.strictObject({
  learning_rate: z.number(),
  beta1: z.number(),
  beta2: z.number(),
  eps: z.number(),
  weight_decay: z.number(),
  grad_clip_norm: z.number(),
});

/** Schemas of the POST bodies, by endpoint (the path after `/api/v1/`). */
export const tinkerRequests = {
  "client/config": z.strictObject({ sdk_version: z.string() }),
  "auth/token": z.strictObject({}),
  create_session: z.strictObject({
    tags: z.array(z.string()),
    user_metadata: metadata.optional(),
    sdk_version: z.string(),
    project_id: z.string().optional(),
    type: z.literal("create_session"),
  }),
  session_heartbeat: z.strictObject({ session_id: z.string(), type: z.literal("session_heartbeat") }),
  create_model: z.strictObject({
    session_id: z.string(),
    model_seq_id: int,
    base_model: z.string(),
    user_metadata: metadata.optional(),
    lora_config: z
      .strictObject({
        rank: int.min(1),
        seed: int.optional(),
        train_unembed: z.boolean(),
        train_mlp: z.boolean(),
        train_attn: z.boolean(),
      })
      .refine(
        (c) => c.train_mlp && c.train_attn,
        "nexrl serve adapts both the attention and the MLP of every block: train_attn and train_mlp must be true (the unembedding is tied to the token embedding and is never adapted, whatever train_unembed says)",
      )
      .optional(),
    type: z.literal("create_model"),
  }),
  get_info: z.strictObject({ model_id: z.string(), type: z.literal("get_info") }),
  unload_model: z.strictObject({ model_id: z.string(), type: z.literal("unload_model") }),
  weights_info: z.strictObject({ tinker_path: z.string() }),
  forward: z.strictObject({ forward_input: lossInput, model_id: z.string(), seq_id: int }),
  forward_backward: z.strictObject({ forward_backward_input: lossInput, model_id: z.string(), seq_id: int }),
  optim_step: z.strictObject({
    adam_params: adamParams,
    model_id: z.string(),
    seq_id: int,
    type: z.literal("optim_step"),
  }),
  save_weights: z.strictObject({
    model_id: z.string(),
    path: z.string(),
    seq_id: int,
    ttl_seconds: int.min(0).optional(),
    overwrite: z.boolean().optional(),
    type: z.literal("save_weights"),
  }),
  save_weights_for_sampler: z
    .strictObject({
      model_id: z.string(),
      path: z.string().optional(),
      // Without a path: a snapshot only for a new sampling session (save_weights_and_get_sampling_client).
      sampling_session_seq_id: int.min(0).optional(),
      seq_id: int,
      ttl_seconds: int.min(0).optional(),
      type: z.literal("save_weights_for_sampler"),
    })
    .refine(
      (b) => (b.path === undefined) !== (b.sampling_session_seq_id === undefined),
      "give either path (a named sampler snapshot) or sampling_session_seq_id (a snapshot for a new sampling session)",
    ),
  load_weights: z.strictObject({
    model_id: z.string(),
    seq_id: int,
    path: z.string(),
    optimizer: z.boolean(),
    weights_access_token: z.string().optional(),
    type: z.literal("load_weights"),
  }),
  create_sampling_session: z.strictObject({
    session_id: z.string(),
    sampling_session_seq_id: int,
    base_model: z.string().optional(),
    model_path: z.string().optional(),
    type: z.literal("create_sampling_session"),
  }),
  asample: z.strictObject({
    sampling_session_id: z.string(),
    seq_id: int,
    num_samples: int.min(1),
    prompt: modelInput,
    sampling_params: z.strictObject({
      max_tokens: int.min(1).optional(),
      seed: int.optional(),
      stop: z.union([z.string(), z.array(z.string()), z.array(int)]).optional(),
      temperature: z.number(),
      top_k: int,
      top_p: z.number(),
    }),
    prompt_logprobs: z.boolean(),
    topk_prompt_logprobs: int,
    type: z.literal("sample"),
  }),
  // The SDK's telemetry batches (events about its own calls): accepted and dropped.
  telemetry: z.looseObject({}),
  retrieve_future: z.strictObject({ request_id: z.string(), allow_metadata_only: z.boolean() }),
} as const;

/** The endpoints with a schema. */
export type TinkerEndpoint = keyof typeof tinkerRequests;

/** The parsed body of `endpoint`. */
export type TinkerRequest<E extends TinkerEndpoint> = z.infer<(typeof tinkerRequests)[E]>;
