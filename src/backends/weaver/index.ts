/**
 * The `weaver` backend: Weaver services (nex-agi) behind the training-service interfaces.
 *
 * @module
 */
export { WEAVER_DEFAULT_BASE_URL, WeaverTrainingService, type WeaverServiceOptions } from "./service.js";
export { DEFAULT_SAMPLER_TTL_SECONDS, WeaverTrainingClient, type WeaverCheckpointType } from "./training-client.js";
export { WeaverSamplingClient, type PauseMode } from "./sampling-client.js";
export { DEFAULT_POLL, type PollOptions } from "./operation.js";
