/**
 * Inference against OpenAI-compatible servers (vLLM, SGLang, `nexrl serve`) with exact token ids.
 *
 * @module
 */
export { OpenAIInferenceClient, type OpenAIInferenceClientOptions, type SamplingDefaults } from "./client.js";
export { parseTokenIdStrings, tokenIdString, type VllmTokenIdFields, type VllmTokenIdRequestFields } from "./vllm.js";
