/**
 * nexrl: post-train LLMs and agents with RL and SFT from TypeScript.
 *
 * @packageDocumentation
 */
export * from "./types/index.js";
export * from "./recipe/index.js";
