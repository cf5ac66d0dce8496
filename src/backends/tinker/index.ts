/**
 * The `tinker` backend: Tinker-protocol services behind the training-service interfaces, in
 * either generation of the protocol (JSON, or protobuf `forward_backward` and results), chosen
 * per server.
 *
 * @module
 */
export { TINKER_DEFAULT_BASE_URL, TinkerTrainingService, type TinkerServiceOptions } from "./service.js";
export { TinkerTrainingClient } from "./training-client.js";
export { TinkerSamplingClient } from "./sampling-client.js";
export {
  TinkerRestClient,
  parseTinkerPath,
  type ParsedTinkerPath,
  type TinkerCheckpoint,
  type TinkerPage,
  type TinkerTrainingRun,
} from "./rest.js";
export { DEFAULT_CHUNK_LIMITS, chunkDatums, estimateDatumBytes, reduceMetrics, type ChunkLimits } from "./chunks.js";
export {
  TINKER_WIRES,
  TINKER_WIRE_ENV,
  type TinkerFlags,
  type TinkerNegotiation,
  type TinkerWire,
} from "./generation.js";
