/**
 * nexrl: post-train LLMs and agents with RL and SFT from TypeScript.
 *
 * @packageDocumentation
 */
export * from "./errors.js";
export * from "./types/index.js";
export * from "./recipe/index.js";
export * from "./engine/index.js";
export * from "./services/training/index.js";
export * from "./http/index.js";
export {
  startServer,
  parseFaults,
  API_KEY_HEADERS,
  type ServerOptions,
  type RunningServer,
  type ServeProtocol,
  type FaultKind,
  type FaultRates,
  type CapturedRequest,
  type RequestHandler,
} from "./server/index.js";
export {
  createOpenAIHandler,
  type ServedModel,
  type OpenAIHandlerOptions,
  type OpenAIRequestHandler,
} from "./server/openai.js";
export * from "./services/inference/index.js";
export * from "./pipeline/index.js";
export * from "./agent/index.js";
export * from "./run-folder/index.js";
export * from "./report/index.js";
