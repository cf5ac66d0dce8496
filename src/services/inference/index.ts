export * from "./types.js";
export * from "./sampler-inference.js";
