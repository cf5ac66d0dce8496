/**
 * The request bodies of the Weaver protocol (wire-protocols §3) as strict zod schemas, and the
 * conversion of Weaver's nested-list tensors into the engine's flat ones.
 *
 * @module
 */
import { z } from "zod";
import type { Datum, TensorData } from "../wire/wire.js";
import { adamParams, metadata } from "./tinker-schema.js";
import { ProtocolError } from "../errors.js";

const int = z.int();
const tensorData = z.strictObject({
  data: z.array(z.unknown()),
  dtype: z.enum(["int64", "int32", "float32", "float64"]),
});
const modelInput = z.strictObject({
  chunks: z.array(z.strictObject({ type: z.literal("encoded_text"), tokens: z.array(int) })),
});
const datum = z.strictObject({ model_input: modelInput, loss_fn_inputs: z.record(z.string(), tensorData) });
const lossInput = z.strictObject({
  loss_fn: z.string(),
  data: z.array(datum),
  loss_fn_config: z.record(z.string(), z.number()).optional(),
});

/** Schemas of the POST bodies, by route name. */
export const weaverRequests = {
  createSession: z.strictObject({
    tags: z.array(z.string()),
    user_metadata: metadata.optional(),
    sdk_version: z.string(),
    project_id: z.string().optional(),
  }),
  createModel: z.strictObject({
    model_seq_id: int,
    base_model: z.string(),
    training_mode: z.enum(["lora", "full_ft"]).optional(),
    lora_config: z
      .strictObject({
        rank: int.min(1),
        train_unembed: z.boolean(),
        train_mlp: z.boolean(),
        train_attn: z.boolean(),
        lora_alpha: z.number().optional(),
        seed: int.optional(),
      })
      .refine(
        (c) => c.train_mlp && c.train_attn,
        "nexrl serve adapts both the attention and the MLP of every block: train_attn and train_mlp must be true (the unembedding is tied to the token embedding and is never adapted, whatever train_unembed says)",
      )
      .optional(),
    user_metadata: metadata.optional(),
    performance_tier: z.enum(["normal", "fast", "flash"]).optional(),
  }),
  forward: z.strictObject({
    payload: z.strictObject({
      model_id: z.string(),
      seq_id: int,
      forward_input: lossInput,
      metadata: metadata.optional(),
    }),
  }),
  forwardBackward: z.strictObject({
    payload: z.strictObject({
      model_id: z.string(),
      seq_id: int,
      forward_backward_input: lossInput,
      metadata: metadata.optional(),
    }),
  }),
  optimStep: z.strictObject({
    payload: z.strictObject({ model_id: z.string(), seq_id: int, adam_params: adamParams }),
  }),
  exportSampler: z.strictObject({
    seq_id: int,
    path: z.string().optional(),
    ttl_seconds: int.min(0).nullable().optional(),
  }),
  saveCheckpoint: z.strictObject({
    type: z.enum(["weight", "weight_and_optimizer", "sampling"]),
    name: z.string().optional(),
    ttl_seconds: int.min(0).nullable().optional(),
  }),
  load: z.strictObject({ path: z.string(), include_optimizer: z.boolean() }),
  terminate: z.strictObject({ instance_types: z.array(z.enum(["trainer", "inference"])).optional() }),
  createSamplingSession: z.strictObject({
    sampling_session_seq_id: int,
    base_model: z.string().nullable().optional(),
    model_path: z.string().nullable().optional(),
    model_id: z.string().optional(),
  }),
  sample: z.strictObject({
    prompt: modelInput,
    sampling_params: z.strictObject({
      temperature: z.number(),
      top_p: z.number(),
      top_k: int,
      max_tokens: int.min(1).optional(),
      stop: z.array(z.string()).optional(),
      seed: int.optional(),
    }),
    num_samples: int.min(1),
    prompt_logprobs: z.boolean(),
    topk_prompt_logprobs: int,
  }),
  logprobs: z.strictObject({ prompt: modelInput }),
  pause: z.strictObject({ mode: z.enum(["abort", "retract", "in_place"]).optional() }),
} as const;

/** Route names with a body schema. */
export type WeaverRoute = keyof typeof weaverRequests;

/** The parsed body of `route`. */
export type WeaverRequest<R extends WeaverRoute> = z.infer<(typeof weaverRequests)[R]>;

/** Weaver's wire datum (nested-list tensors). */
export type WeaverDatum = z.infer<typeof datum>;

/** Flattens a nested list row-major, checking that it is rectangular and numeric. */
function flatten(value: unknown[], where: string): { data: number[]; shape: number[] } {
  const shape: number[] = [];
  for (let level: unknown = value; Array.isArray(level); level = level[0]) shape.push(level.length);
  const data: number[] = [];
  const walk = (node: unknown, depth: number): void => {
    if (depth === shape.length) {
      if (typeof node !== "number")
        throw new ProtocolError(`${where}: expected a number, got ${JSON.stringify(node)}`, {
          status: 422,
          code: "invalid_tensor",
        });
      data.push(node);
      return;
    }
    if (!Array.isArray(node) || node.length !== shape[depth])
      throw new ProtocolError(`${where}: the nested list is not rectangular`, { status: 422, code: "invalid_tensor" });
    for (const child of node) walk(child, depth + 1);
  };
  walk(value, 0);
  return { data, shape };
}

/** A Weaver datum as the engine reads it: flat tensors with a shape, dtypes int64 / float32. */
export function flatDatum(wire: WeaverDatum, index: number): Datum {
  const loss_fn_inputs: Record<string, TensorData> = {};
  for (const [key, tensor] of Object.entries(wire.loss_fn_inputs)) {
    const { data, shape } = flatten(tensor.data, `datum ${index} loss input "${key}"`);
    loss_fn_inputs[key] = { data, dtype: tensor.dtype.startsWith("int") ? "int64" : "float32", shape };
  }
  return { model_input: wire.model_input, loss_fn_inputs };
}
