/**
 * The parts of a datum that the Tinker client writes from where their values are defined (see
 * `number-json.ts`) rather than through `JSON.stringify`, and the checks that make that safe:
 * only finite numbers are written that way.
 *
 * - An untouched datum of `trajectoryToDatum` (every part a `TokensView` / `TensorView` nothing
 *   has read): its values are checked in place, without being copied.
 * - Any other datum, once `validateLossInputs` has passed it: its plain arrays.
 *
 * @module
 */
import { TensorView, TokensView, type LazyValues } from "../../../types/datum-view.js";
import { validateLossInputs, type LossFunctionName } from "../../../types/losses.js";
import type { Datum, ModelInput, TensorData } from "../../../types/wire.js";
import type { SourcedValues } from "./number-json.js";

/** A datum as the writer sees it. */
export interface DatumParts {
  /** The token run of a model input of one `encoded_text` chunk; undefined: write the model input with `JSON.stringify`. */
  tokens: SourcedValues | undefined;
  /** Each loss input sent: its key, its values (undefined: write `tensor` with `JSON.stringify`), and the tensor as sent. */
  inputs: Array<[key: string, values: SourcedValues | undefined, tensor: TensorData]>;
}

/** Whether every value is a finite number and, for `tokenIds`, a non-negative integer (the value checks of `validateLossInputs` on Tinker). */
function valuesPass(values: SourcedValues, tokenIds: boolean): boolean {
  const { source, length } = values;
  // One loop per case, each with its test inline: this runs over every value sent.
  if ("at" in source) {
    for (let i = 0; i < length; i++) {
      const v = source.at(i);
      if (tokenIds ? !(Number.isInteger(v) && v >= 0) : !Number.isFinite(v)) return false;
    }
    return true;
  }
  const { array, start } = source.window;
  const end = start + length;
  if (tokenIds) {
    for (let i = start; i < end; i++) {
      const v = array[i]!;
      if (!(Number.isInteger(v) && v >= 0)) return false;
    }
  } else {
    for (let i = start; i < end; i++) if (!Number.isFinite(array[i])) return false;
  }
  return true;
}

/** Whether the own enumerable keys of `value` are `keys`, in that order (the order `JSON.stringify` writes them in). */
function keysAre(value: object, ...keys: string[]): boolean {
  const own = Object.keys(value);
  return own.length === keys.length && own.every((key, i) => key === keys[i]);
}

/** The single `encoded_text` chunk of `modelInput` when it has nothing else: `{"chunks":[{"type":"encoded_text","tokens":[…]}]}` as JSON. */
function textChunk(modelInput: ModelInput): { type: "encoded_text"; tokens: number[] } | undefined {
  const chunk = modelInput.chunks.length === 1 && keysAre(modelInput, "chunks") ? modelInput.chunks[0]! : undefined;
  return chunk?.type === "encoded_text" && keysAre(chunk, "type", "tokens") ? chunk : undefined;
}

/**
 * The parts of a datum of untouched views, checked against the contract of `lossFn` on Tinker;
 * undefined when it is not such a datum, or when a size or a value is wrong (the general path
 * then reports it, worded as ever).
 * @param inputs the loss inputs sent (client-only keys removed).
 * @throws InputError when the datum breaks a part of the contract that does not depend on values.
 */
export function viewParts(
  datum: Datum,
  inputs: Record<string, TensorData>,
  lossFn: LossFunctionName,
  config: Record<string, number> | undefined,
): DatumParts | undefined {
  const chunk = textChunk(datum.model_input);
  const tokens = chunk && TokensView.valuesOf(chunk);
  // The model input is not checked by the contract, but only finite numbers are written from sources.
  if (!tokens?.unread || !valuesPass(tokens, false)) return undefined;
  const parts: DatumParts = { tokens, inputs: [] };
  const withoutValues: Record<string, TensorData> = {};
  for (const [key, tensor] of Object.entries(inputs)) {
    const values: LazyValues | undefined = TensorView.valuesOf(tensor);
    if (
      !values?.unread ||
      !keysAre(tensor, "data", "dtype") ||
      values.length !== tokens.length ||
      !valuesPass(values, key === "target_tokens")
    )
      return undefined;
    parts.inputs.push([key, values, tensor]);
    withoutValues[key] = { data: [], dtype: tensor.dtype };
  }
  // Sizes and values are right, so only the checks that do not read values can fail: names,
  // dtypes, the backend and the config. Run exactly those, on the datum with its values left out.
  validateLossInputs(
    lossFn,
    { model_input: { chunks: [] }, loss_fn_inputs: withoutValues },
    { backend: "tinker", ...(config && { config }) },
  );
  return parts;
}

/**
 * The parts of a datum `validateLossInputs` has passed, as sent (`wire`: client-only keys removed,
 * shapes added to the loss inputs `inputs`): its plain arrays, whose values the contract checked,
 * and its model input's tokens when they are finite numbers.
 */
export function plainParts(wire: Datum, inputs: Record<string, TensorData>): DatumParts {
  const chunk = textChunk(wire.model_input);
  const tokens = chunk && Array.isArray(chunk.tokens) ? chunk.tokens : undefined;
  const parts: DatumParts = { tokens: tokens && window(tokens), inputs: [] };
  if (parts.tokens && !valuesPass(parts.tokens, false)) parts.tokens = undefined;
  for (const [key, tensor] of Object.entries(wire.loss_fn_inputs)) {
    // Sent as {…the tensor, shape}: written from its array when the tensor is just { data, dtype }.
    const plain = keysAre(inputs[key]!, "data", "dtype") && Array.isArray(tensor.data);
    parts.inputs.push([key, plain ? window(tensor.data) : undefined, tensor]);
  }
  return parts;
}

/** All of `array`. */
function window(array: readonly number[]): SourcedValues {
  return { length: array.length, source: { window: { array, start: 0 } } };
}
