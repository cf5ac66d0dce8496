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
export { createTrainingService, type TrainingServiceOptions } from "../backends/index.js";
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
export { LocalTrainingService, type LocalTrainingServiceOptions } from "../backends/local/index.js";
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
} from "../backends/tinker/index.js";
/** @category Tinker */
export type { TinkerWire, TinkerNegotiation, TinkerFlags } from "../backends/tinker/generation.js";
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
} from "../backends/weaver/index.js";
/** @category Tinker */
export { SequencedTrainingClient, type LossPass } from "../backends/remote/training-client.js";
/** @category HTTP */
export type { BackoffOptions } from "../http/backoff.js";
/** @category HTTP */
export type { RemoteServiceOptions } from "../backends/remote/session.js";
/** @category HTTP */
export type { EndpointOptions } from "../http/endpoint.js";
/** @category Inference */
export type { InferenceClient, InferenceOptions, InferenceResult, FinishReason } from "../contracts/inference.js";
/** @category Inference */
export { SamplerInferenceClient, type SamplerInferenceClientOptions } from "../inference/sampler-inference.js";
/** @category Inference */
export {
  OpenAIInferenceClient,
  type OpenAIInferenceClientOptions,
  type SamplingDefaults,
} from "../inference/openai/client.js";
/** @category Tokenizers */
export { loadTokenizer, type LoadTokenizerOptions } from "../inference/tokenizers/load.js";
/** @category Tokenizers */
export { HfTokenizer, type HfTokenizerOptions } from "../inference/tokenizers/hf-tokenizer.js";
/** @category Tokenizers */
export { RENDERER_IDS, type RendererId } from "../inference/renderers/index.js";
/** @category Tokenizers */
export { readTokenizerFolder, type HfTokenizerFiles } from "../inference/tokenizers/files.js";
/** @category Tokenizers */
export { downloadTokenizer, defaultTokenizerCacheDir, type HubDownloadOptions } from "../inference/tokenizers/hub.js";
