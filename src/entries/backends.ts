/**
 * `nexrl/backends`: the training services one by one — `local` (the embedded engine), `tinker`
 * (with its REST client for runs and checkpoints) and `weaver` — with their options, the
 * service interfaces' supporting types, the HTTP settings they share, the model presets, and the
 * inference clients' and tokenizers' details. `createTrainingService` (also at the root) picks a
 * backend by name.
 *
 * @packageDocumentation
 * @module nexrl/backends
 */

/** @category Training services */
export { createTrainingService, type TrainingServiceOptions } from "../services/training/index.js";
/** @category Training services */
export type {
  TrainingBackend,
  TrainingService,
  TrainingClient,
  SamplingClient,
  ApiFuture,
  SavedPath,
  ModelInfo,
  CreateTrainingClientOptions,
  SaveStateOptions,
} from "../contracts/training.js";
/** @category Local */
export { LocalTrainingService, type LocalTrainingServiceOptions } from "../services/training/local/index.js";
/** @category Local */
export { MODEL_PRESETS, type ModelConfig, type ModelPresetName } from "../engine/config.js";
/** @category Local */
export type { ComputeOptions } from "../engine/runtime.js";
/** @category Local */
export type { KernelKind } from "../engine/matrix.js";
/** @category Local */
export { DEFAULT_LOCAL_MODEL } from "../recipe/schema/service.js";
/** @category Tinker */
export {
  TinkerTrainingService,
  type TinkerServiceOptions,
  TINKER_DEFAULT_BASE_URL,
  TinkerRestClient,
  parseTinkerPath,
  type ParsedTinkerPath,
  type TinkerCheckpoint,
  type TinkerPage,
  type TinkerTrainingRun,
} from "../services/training/tinker/index.js";
/** @category Tinker */
export type { TinkerWire, TinkerNegotiation, TinkerFlags } from "../services/training/tinker/generation.js";
/** @category Weaver */
export {
  WeaverTrainingService,
  type WeaverServiceOptions,
  WEAVER_DEFAULT_BASE_URL,
  WeaverTrainingClient,
  type WeaverCheckpointType,
  WeaverSamplingClient,
  type PauseMode,
  type PollOptions,
} from "../services/training/weaver/index.js";
/** @category Tinker */
export { SequencedTrainingClient, type LossPass } from "../services/training/remote/training-client.js";
/** @category HTTP */
export type { BackoffOptions } from "../http/backoff.js";
/** @category HTTP */
export type { RemoteServiceOptions } from "../services/training/remote/session.js";
/** @category HTTP */
export type { EndpointOptions } from "../http/endpoint.js";
/** @category Inference */
export type { InferenceClient, InferenceOptions, InferenceResult, FinishReason } from "../contracts/inference.js";
/** @category Inference */
export { SamplerInferenceClient, type SamplerInferenceClientOptions } from "../services/inference/sampler-inference.js";
/** @category Inference */
export {
  OpenAIInferenceClient,
  type OpenAIInferenceClientOptions,
  type SamplingDefaults,
} from "../services/inference/openai/client.js";
/** @category Tokenizers */
export { loadTokenizer, type LoadTokenizerOptions } from "../services/inference/tokenizers/load.js";
/** @category Tokenizers */
export { HfTokenizer, type HfTokenizerOptions } from "../services/inference/tokenizers/hf-tokenizer.js";
/** @category Tokenizers */
export { RENDERER_IDS, type RendererId } from "../services/inference/renderers/index.js";
/** @category Tokenizers */
export { readTokenizerFolder, type HfTokenizerFiles } from "../services/inference/tokenizers/files.js";
/** @category Tokenizers */
export {
  downloadTokenizer,
  defaultTokenizerCacheDir,
  type HubDownloadOptions,
} from "../services/inference/tokenizers/hub.js";
