/**
 * LoRA adapters in PEFT's format (`adapter_config.json` + `adapter_model.safetensors`, tensors
 * named `base_model.model.<module>.lora_A.weight` / `.lora_B.weight`), as `peft` and vLLM's
 * `--lora-modules` load them.
 *
 * A LoRA model of the local engine (every Tinker model of `nexrl serve`, and Weaver's
 * `training_mode: lora`) trains rank-r factors over frozen base weights (see `engine/lora.ts`);
 * its adapter ({@link trainedLoraAdapter}) holds those factors exactly, with the rank and
 * `lora_alpha` they were trained with, so PEFT's merge of it into the base gives the engine's
 * weights bit for bit in float32 (embeddings, layer norms and biases are frozen, so nothing is left out).
 * @module
 * @internal
 */
import type { ResolvedModelConfig } from "../engine/config.js";
import { loraTargets } from "../engine/lora.js";
import {
  decodeSafetensors,
  encodeRawSafetensors,
  encodeSafetensors,
  type NamedTensor,
  type RawTensor,
} from "./safetensors.js";
import { InputError } from "../errors.js";

/** A PEFT adapter: its `adapter_config.json` and its `adapter_model.safetensors` bytes. */
export interface PeftAdapter {
  config: Record<string, unknown>;
  safetensors: Uint8Array;
}

/** The modules the adapter targets, by their GPT-2 (`GPT2LMHeadModel`) names. */
const TARGET_MODULES = ["c_attn", "c_fc", "c_proj"];

/** PEFT's `adapter_config.json` for a LoRA of rank `r` and `lora_alpha` `alpha` on the GPT-2 modules. */
function peftConfig(baseModel: string, r: number, alpha: number): Record<string, unknown> {
  return {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: baseModel,
    r,
    lora_alpha: alpha,
    lora_dropout: 0,
    bias: "none",
    fan_in_fan_out: true,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    rank_pattern: {},
    alpha_pattern: {},
    target_modules: TARGET_MODULES,
  };
}

/**
 * The PEFT adapter of a LoRA model's trained `factors` (as its state file holds them: per
 * projection `lora_A` [r × in] then `lora_B` [out × r]), tensor for tensor, with `rank` and
 * `alpha` as `r` and `lora_alpha`, and `baseModel` as `base_model_name_or_path`.
 */
export function trainedLoraAdapter(
  config: ResolvedModelConfig,
  lora: { rank: number; alpha: number; factors: Float32Array },
  baseModel: string,
): PeftAdapter {
  const r = lora.rank;
  const tensors: NamedTensor[] = [];
  let at = 0;
  for (const { module, inDim, outDim } of loraTargets(config)) {
    const name = `base_model.model.${module}`;
    tensors.push({ name: `${name}.lora_A.weight`, shape: [r, inDim], data: lora.factors.subarray(at, at + r * inDim) });
    at += r * inDim;
    tensors.push({
      name: `${name}.lora_B.weight`,
      shape: [outDim, r],
      data: lora.factors.subarray(at, at + r * outDim),
    });
    at += r * outDim;
  }
  return {
    config: peftConfig(baseModel, r, lora.alpha),
    safetensors: encodeSafetensors(tensors, { format: "pt" }),
  };
}

/**
 * A downloaded Tinker adapter (`adapter_config.json` + `adapter_model.safetensors`, as Tinker's
 * and `nexrl serve`'s archives hold them) made loadable by `peft` and vLLM: Tinker's
 * `model.unembed_tokens` becomes `lm_head`, the tensors are kept as they are (dtype included),
 * and `base_model_name_or_path` is `baseModel` when given.
 * @throws {@link "nexrl/errors".InputError | InputError} when the config lacks `r` or `lora_alpha`, or the adapter has
 * 3-D (mixture-of-experts) tensors, which need a per-expert split this export does not do.
 */
export function peftFromTinkerAdapter(
  configJson: Uint8Array,
  safetensors: Uint8Array,
  baseModel: string | undefined,
): PeftAdapter {
  const config = JSON.parse(new TextDecoder().decode(configJson)) as Record<string, unknown>;
  for (const key of ["r", "lora_alpha"])
    if (typeof config[key] !== "number")
      throw new InputError(`the checkpoint's adapter_config.json has no numeric "${key}"; it is not a LoRA adapter`);
  const { tensors } = decodeSafetensors(safetensors, "adapter_model.safetensors");
  const out: RawTensor[] = [];
  const modules = new Set<string>();
  for (const t of tensors) {
    if (t.shape.length !== 2)
      throw new InputError(
        `adapter tensor ${t.name} has shape [${t.shape.join(", ")}]; only 2-D LoRA tensors are exported (mixture-of-experts adapters need tinker-cookbook's build_lora_adapter)`,
      );
    const name = t.name.replace(".model.unembed_tokens.", ".lm_head.");
    const module = /\.([^.]+)\.lora_[AB]\.weight$/.exec(name)?.[1];
    if (module !== undefined) modules.add(module);
    out.push({ ...t, name });
  }
  const peft: Record<string, unknown> = {
    ...config,
    peft_type: "LORA",
    task_type: config["task_type"] ?? "CAUSAL_LM",
    target_modules: [...modules].sort(),
    ...(baseModel !== undefined && { base_model_name_or_path: baseModel }),
  };
  return { config: peft, safetensors: encodeRawSafetensors(out, { format: "pt" }) };
}
