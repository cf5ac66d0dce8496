import { ConfigError } from "../errors.js";
/**
 * Model configurations of the local engine and the named presets recipes select with
 * `service.*.model`.
 *
 * @module
 */

/** Shape of the local engine's decoder-only transformer. */
export interface ModelConfig {
  /** Width of the residual stream; a multiple of `nHeads`. */
  dModel: number;
  /** Number of transformer blocks. */
  nLayers: number;
  /** Attention heads per block. */
  nHeads: number;
  /** Maximum number of positions of a sequence (learned positional embeddings). */
  contextLength: number;
  /** Vocabulary size; defaults to the tokenizer's and may not be smaller than it. */
  vocabSize?: number;
}

/** A {@link ModelConfig} with every field set. */
export type ResolvedModelConfig = Required<ModelConfig>;

/** Names of {@link MODEL_PRESETS}. */
export type ModelPresetName = "tiny" | "small" | "medium" | "large";

/**
 * Named model shapes. `tiny` (about 38 k parameters) trains in milliseconds and is meant for
 * tests; `small` (about 0.86 M parameters) is the laptop default for recipes; `medium` (about
 * 4.9 M parameters: twice the width, 6 layers) is for recipes that need more capacity, at
 * about six times the cost per token of `small`; `large` (about 25.6 M parameters: d 512, 8
 * layers, context 512) shows how the cost grows with size and fits jobs that can wait for it.
 */
export const MODEL_PRESETS: Readonly<Record<ModelPresetName, Readonly<ModelConfig>>> = Object.freeze({
  tiny: Object.freeze({ dModel: 32, nLayers: 2, nHeads: 2, contextLength: 128 }),
  small: Object.freeze({ dModel: 128, nLayers: 4, nHeads: 4, contextLength: 256 }),
  medium: Object.freeze({ dModel: 256, nLayers: 6, nHeads: 8, contextLength: 256 }),
  large: Object.freeze({ dModel: 512, nLayers: 8, nHeads: 8, contextLength: 512 }),
});

/**
 * Resolves a preset name or a config into a validated {@link ResolvedModelConfig}.
 * @param tokenizerVocabSize the tokenizer's vocabulary size (the default and minimum `vocabSize`).
 * @throws {@link "nexrl".ConfigError | ConfigError} for an unknown preset or invalid sizes.
 */
export function resolveModelConfig(
  model: ModelPresetName | ModelConfig,
  tokenizerVocabSize: number,
): ResolvedModelConfig {
  let config: ModelConfig;
  if (typeof model === "string") {
    if (!Object.hasOwn(MODEL_PRESETS, model)) {
      throw new ConfigError(
        `unknown model preset "${model}"; use one of ${Object.keys(MODEL_PRESETS).join(", ")} or give { dModel, nLayers, nHeads, contextLength }`,
      );
    }
    config = MODEL_PRESETS[model];
  } else {
    config = model;
  }
  const resolved: ResolvedModelConfig = {
    dModel: config.dModel,
    nLayers: config.nLayers,
    nHeads: config.nHeads,
    contextLength: config.contextLength,
    vocabSize: config.vocabSize ?? tokenizerVocabSize,
  };
  for (const [key, value] of Object.entries(resolved)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new ConfigError(`model config ${key} must be a positive integer, got ${String(value)}`);
    }
  }
  if (resolved.dModel % resolved.nHeads !== 0) {
    throw new ConfigError(`model config dModel (${resolved.dModel}) must be a multiple of nHeads (${resolved.nHeads})`);
  }
  if (resolved.vocabSize < tokenizerVocabSize) {
    throw new ConfigError(
      `model config vocabSize (${resolved.vocabSize}) is smaller than the tokenizer's vocabulary (${tokenizerVocabSize}); omit it to use the tokenizer's`,
    );
  }
  return resolved;
}
