/**
 * nexrl: post-train LLMs and agents with RL and SFT from TypeScript.
 *
 * @packageDocumentation
 */
export * from "./types/index.js";
export * from "./recipe/index.js";
export * from "./engine/index.js";
export * from "./services/training/types.js";
export * from "./services/training/local/index.js";
export * from "./services/inference/index.js";
