export * from "./wire.js";
export * from "./tokenizer.js";
export * from "./results.js";
