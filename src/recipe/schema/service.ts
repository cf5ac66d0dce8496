/**
 * `service:` and `weight:` — the training and inference services and how weights reach the
 * sampler (inventory §4, §5).
 * @module
 */
import { z } from "zod";
import { nonEmpty, nonNegativeInt, positiveInt, refuse, SELF_HOSTED_WEIGHTS, type IssueSink } from "./common.js";
import { hyperParametersSchema } from "./trainer.js";
import { REASONING_PARSERS, reasoningMismatch, TOOL_PARSERS } from "../../inference/chat-formats/index.js";

/** Training backends: the embedded CPU engine, Tinker, Weaver. */
export const TRAIN_BACKENDS = ["local", "tinker", "weaver"] as const;
/** Inference backends: a training backend's own sampler, or an OpenAI-compatible server. */
export const INFERENCE_BACKENDS = [...TRAIN_BACKENDS, "openai", "vllm", "sglang"] as const;

/**
 * The model `backend: local` trains when the recipe names none: the engine's `small` preset
 * (about 0.86 M parameters, context 256, byte tokenizer). Remote backends have no default model.
 */
export const DEFAULT_LOCAL_MODEL = "small";

/** Shape of `service.train_service:` (NexRL's flat form; the named form `{main_actor: {...}}` is accepted too). */
export const trainServiceSchema = z.strictObject({
  /** Routes trajectories and weight syncs; must equal `inference_service.identifier`. */
  identifier: nonEmpty.default("default"),
  /** The only role supported: the policy being trained. */
  role: z.enum(["actor"]).default("actor"),
  /** Where training runs. */
  backend: z.enum(TRAIN_BACKENDS),
  /** Base model to train (a preset name such as `tiny` for `local`); defaults to `inference_service.model`, and for `local` then to {@link DEFAULT_LOCAL_MODEL} (`small`). */
  model: nonEmpty.optional(),
  /** Hyper-parameters (NexRL's place for them); merged into `trainer.algorithm`. */
  config: hyperParametersSchema.optional(),
  /**
   * `tinker` only: which generation of the Tinker protocol to speak. `auto` lets the server
   * choose through its `client/config` flags (JSON unless it asks for protobuf); `json` and
   * `protobuf` (the Tinker SDK 0.25's wire) force one. Unset: `NEXRL_TINKER_WIRE`, else `auto`.
   */
  wire: z.enum(["auto", "json", "protobuf"]).optional(),
});

/** Shape of `service.inference_service:`. */
export const inferenceServiceSchema = z.strictObject({
  /** Routes trajectories and weight syncs; must equal `train_service.identifier`. */
  identifier: nonEmpty.default("default"),
  /** Model to sample from; defaults to `train_service.model`. */
  model: nonEmpty.optional(),
  /** Where sampling runs; defaults to the training backend's own sampler. */
  backend: z.enum(INFERENCE_BACKENDS).optional(),
  /** Base URL of an OpenAI-compatible server (`openai`, `vllm`, `sglang`); refused for a training backend's sampler. */
  base_url: z.string().nullable().optional(),
  /** API key of that server; refused for a training backend's sampler. */
  api_key: z.string().nullable().optional(),
  /** Most tokens per response; must equal `rollout_worker.max_response_length` when given. */
  max_tokens: positiveInt.optional(),
  /** Tokenizer (a model name or a `tokenizer.json` path); defaults to the model's. */
  tokenizer: z.string().nullable().optional(),
  /** Retries of a failed request to an OpenAI-compatible server; refused for a training backend's sampler (its service's transport retries). */
  max_retries: nonNegativeInt.optional(),
  /** Hold sampling requests while weights are being synced: always so (each sync switches to a new snapshot at once); only `true` is accepted. */
  freeze_for_weight_sync: z.boolean().default(true),
  /** NexRL's self-hosted weight type: only `""` is accepted. */
  weight_type: z.string().default(""),
  /** NexRL's self-hosted model path: refused when set (the sampler serves the trained weights). */
  model_path: z.string().optional(),
  /**
   * The tool-call format the agent gateway reads in sampled text and writes back into prompts
   * (SGLang's names): `qwen25` / `hermes` (`<tool_call>{json}</tool_call>`), `qwen3_coder`
   * (`<function=…><parameter=…>` XML), `llama3`, `deepseekv3`, `deepseekv31`, `gpt-oss` (Harmony),
   * `mistral`, `kimi_k2`; default: the format the model's chat template writes (hermes when it shows none).
   */
  tool_parser: nonEmpty.optional(),
  /**
   * How reasoning is split out of replies into `reasoning_content`: `think_tag` (`<think>…</think>`),
   * `qwen3` (the same), `deepseek-r1` (all text up to `</think>`), `gpt-oss` (Harmony's analysis
   * channel), `none` (left in the content); default: `gpt-oss` for Harmony, else `think_tag`.
   */
  reasoning_parser: nonEmpty.optional(),
  /** NexRL's parsing of tool-call arguments into objects: only `false` is accepted (arguments stay JSON text, as in OpenAI's API). */
  parse_tool_call_arguments: z.boolean().default(false),
});

/** Refuses the `inference_service` keys nothing would read with `sampler`, the backend that samples. */
export function checkInferenceService(
  inference: z.output<typeof inferenceServiceSchema>,
  sampler: string,
  ctx: IssueSink,
): void {
  const viaTraining = (TRAIN_BACKENDS as readonly string[]).includes(sampler);
  for (const key of ["base_url", "api_key", "max_retries"] as const) {
    const value = inference[key];
    if (viaTraining && value !== undefined && value !== null && value !== "")
      refuse(
        ctx,
        [key],
        `applies to OpenAI-compatible inference servers (openai, vllm, sglang); the ${sampler} sampler is reached through the training service (service.${sampler === "local" ? "train_service" : `${sampler}_service`}); remove it`,
      );
  }
  if (!inference.freeze_for_weight_sync)
    refuse(
      ctx,
      ["freeze_for_weight_sync"],
      "a weight sync switches new requests to a new sampler snapshot at once, so no request meets weights being synced; remove it",
    );
  if (inference.weight_type !== "")
    refuse(ctx, ["weight_type"], 'self-hosted weight sync is not supported; remove it (or set "")');
  if (inference.model_path !== undefined)
    refuse(
      ctx,
      ["model_path"],
      "self-hosted inference is not supported: the sampler serves the weights being trained; remove it",
    );
  const toolParser = inference.tool_parser;
  if (toolParser !== undefined && !Object.hasOwn(TOOL_PARSERS, toolParser))
    refuse(
      ctx,
      ["tool_parser"],
      `unknown tool parser \`${toolParser}\`; use one of ${Object.keys(TOOL_PARSERS).join(", ")}`,
    );
  const reasoning = inference.reasoning_parser;
  if (reasoning !== undefined) {
    // The family is known here only when tool_parser names it; otherwise the chat template decides at run time.
    const family =
      toolParser !== undefined && Object.hasOwn(TOOL_PARSERS, toolParser) ? TOOL_PARSERS[toolParser] : undefined;
    const problem = (REASONING_PARSERS as readonly string[]).includes(reasoning)
      ? family && reasoningMismatch(family, reasoning)
      : `unknown reasoning parser \`${reasoning}\`; use one of ${REASONING_PARSERS.join(", ")}`;
    if (problem) refuse(ctx, ["reasoning_parser"], problem);
  }
  if (inference.parse_tool_call_arguments)
    refuse(
      ctx,
      ["parse_tool_call_arguments"],
      "tool-call arguments stay JSON text, as in OpenAI's API (chat templates receive them so); remove it (or set false)",
    );
}

/** Most threads `service.local_service.threads` accepts. */
export const MAX_LOCAL_THREADS = 256;

/** Shape of `service.local_service:` — how the embedded engine of `backend: local` computes. */
export const localServiceSchema = z.strictObject({
  /**
   * Threads for training steps and sampling; default: the machine's available parallelism.
   * Training results are reproducible for a given count; samples do not depend on it.
   */
  threads: positiveInt.max(MAX_LOCAL_THREADS).optional(),
  /** `wasm` (WebAssembly SIMD, the default where available) or `js` (the TypeScript reference kernels). */
  kernels: z.enum(["wasm", "js"]).optional(),
});

/** Shape of `service.tinker_service:` and `service.weaver_service:` (without `training_mode`). */
const remoteServiceShape = {
  /** Service URL; null for the SDK default (`TINKER_BASE_URL` / `WEAVER_BASE_URL`). */
  base_url: z.string().nullable().default(null),
  /** LoRA rank. */
  lora_rank: positiveInt.default(32),
  /** API key, usually `${oc.env:TINKER_API_KEY}` / `${oc.env:WEAVER_API_KEY}`. */
  api_key: z.string().nullable().optional(),
};

/** Shape of `service.tinker_service:`. */
export const tinkerServiceSchema = z.strictObject(remoteServiceShape);

/** Shape of `service.weaver_service:`. */
export const weaverServiceSchema = z.strictObject({
  ...remoteServiceShape,
  /** LoRA adapters or full fine-tuning. */
  training_mode: z.enum(["lora", "full_ft"]).default("lora"),
});

/** Shape of `weight:` — weight synchronisation between trainer and sampler. */
export const weightSchema = z
  .strictObject({
    /** NexRL's only weight-sync type. */
    type: z.enum(["default"]).default("default"),
    /** `sync`: sync after every step; `batch-async`: roll out on weights up to `staleness_threshold` versions old; `fully-async`: never wait. */
    sync_mode: z.enum(["sync", "batch-async", "fully-async"]).default("sync"),
    /** Most weight versions the sampler may lag behind in `batch-async` and `fully-async` (refused above 0 in `sync`). */
    staleness_threshold: nonNegativeInt.default(0),
    /** NexRL compatibility: must equal `validate.eval.validate_freq` when given. */
    validate_freq: nonNegativeInt.optional(),
    /** How weights reach the sampler; must match the training backend when given. */
    sync_method: z.enum(TRAIN_BACKENDS).optional(),
    /** NexRL's self-hosted weight path: only `""` is accepted. */
    sync_weight_path: z.string().optional(),
  })
  .superRefine((weight, ctx) => {
    if (weight.sync_weight_path) refuse(ctx, ["sync_weight_path"], SELF_HOSTED_WEIGHTS);
    if (weight.sync_mode === "sync" && weight.staleness_threshold > 0)
      refuse(
        ctx,
        ["staleness_threshold"],
        "applies to `batch-async` and `fully-async`: in `sync` mode every step trains on rollouts of the weights before it; set `sync_mode: batch-async` to roll out ahead, or remove it",
      );
  })
  .prefault({});
