/**
 * The run folder as the interface to everything after a run: reading what a run wrote, finding
 * its weights, and opening its trained model for sampling.
 * @module
 */
export { readRunFolder, type RunFolder, type RunSession } from "./read.js";
export { readRunWeights, type RunCheckpoint, type RunSnapshot, type RunWeights } from "./weights.js";
export { openRunModel, parseRunModelRef, type OpenRunModelOptions, type RunModel, type RunModelRef } from "./model.js";
