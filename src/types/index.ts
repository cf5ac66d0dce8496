export * from "./wire.js";
export * from "./trajectory.js";
export * from "./losses.js";
export * from "./tokenizer.js";
export * from "./results.js";
