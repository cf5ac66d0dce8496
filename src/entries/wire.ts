/**
 * `nexrl/wire`: what crosses to a training or sampling service — datums, model inputs and
 * tensors, Adam parameters, sampling parameters and results, the loss-pass outputs, each loss's
 * contract and the checks run before sending, and the tokenizer types the services share.
 * Field names here keep the wire's snake_case (`loss_fn_inputs`, `model_input`).
 *
 * @packageDocumentation
 * @module nexrl/wire
 */

/** @category Datums and tensors */
export {
  type Datum,
  type ModelInput,
  type ModelInputChunk,
  type EncodedTextChunk,
  type ImageChunk,
  type ImageAssetPointerChunk,
  type TensorData,
  type TensorDtype,
  type AdamParams,
  DEFAULT_ADAM_PARAMS,
  adamParams,
  datum,
  tensorData,
  tensorValues,
  modelInputFromTokens,
  modelInputTokens,
  modelInputLength,
} from "../wire/wire.js";
/** @category Sampling and loss-pass results */
export type {
  SamplingParams,
  SampledSequence,
  SampleOutput,
  LossFnOutput,
  ForwardBackwardOutput,
  OptimStepOutput,
} from "../wire/results.js";
/** @category Tokenizers */
export {
  type ChatMessage,
  type ToolCall,
  type ToolDefinition,
  type ChatTemplateOptions,
  type EncodeOptions,
  type DecodeOptions,
  type UnknownIdHandling,
  type Tokenizer,
  unknownTokenPlaceholder,
  encodePrompt,
} from "../wire/tokenizer.js";
/** @category Losses */
export {
  lossFunctions,
  LOSS_FUNCTION_NAMES,
  getLossFunction,
  type LossFunctionName,
  type BuiltinLossName,
  type ServerDefinedLossName,
  type LossBackend,
  type BuiltinLossContract,
  type ServerDefinedLossContract,
  type LossFunctionContract,
} from "../contracts/losses.js";
/** @category Losses */
export type { LossInputSpec, LossEvaluation, LossInputValues } from "../wire/loss-math.js";
/** @category Losses */
export { validateLossInputs, type ValidateLossInputsOptions } from "../contracts/loss-validation.js";
/** @category Losses */
export { forwardBackwardCustom, type LossPassClient } from "../backends/custom-loss.js";
/** @category Losses */
export type { CustomLossFn, CustomLossResult } from "../contracts/training.js";
