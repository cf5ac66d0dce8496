/**
 * The embedded local engine: a small decoder-only transformer trained and sampled on the CPU in
 * TypeScript, playing both the training and the sampling service for `backend: local`.
 *
 * @module nexrl/engine
 */
export { LocalEngine, type LocalEngineOptions, type StateOptions } from "./engine.js";
export { LocalSampler } from "./sampler.js";
export type { LoraOptions, ResolvedLora } from "./lora.js";
export {
  MODEL_PRESETS,
  resolveModelConfig,
  type ModelConfig,
  type ModelPresetName,
  type ResolvedModelConfig,
} from "./config.js";
export { ByteTokenizer } from "./tokenizer.js";
export type { ComputeOptions } from "./runtime.js";
export type { KernelKind } from "./matrix.js";
