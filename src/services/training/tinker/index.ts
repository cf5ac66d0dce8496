/**
 * The `tinker` backend: Tinker-protocol services (JSON wire generation) behind the
 * training-service interfaces.
 *
 * @module
 */
export { TINKER_DEFAULT_BASE_URL, TinkerTrainingService, type TinkerServiceOptions } from "./service.js";
export { TinkerTrainingClient } from "./training-client.js";
export { TinkerSamplingClient } from "./sampling-client.js";
export { RequestFailedError, UnsupportedTrainingModeError, type RequestErrorCategory } from "./errors.js";
export { TinkerResponseError } from "./wire.js";
export { DEFAULT_CHUNK_LIMITS, chunkDatums, estimateDatumBytes, reduceMetrics, type ChunkLimits } from "./chunks.js";
