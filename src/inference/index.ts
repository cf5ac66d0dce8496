export * from "../contracts/inference.js";
export * from "./sampler-inference.js";
export * from "./tokenizers/index.js";
export * from "./openai/index.js";
