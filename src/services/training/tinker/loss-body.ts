/**
 * The JSON bodies of `forward` and `forward_backward` (wire-protocols §1.4), serialised by the
 * client: every datum is checked against the loss contract before anything is written, each body
 * is written once, and the same bytes are sent on every attempt. They are exactly the UTF-8 of
 * `JSON.stringify` of the documented body (`{ <input key>: { data, loss_fn, loss_fn_config? },
 * model_id, seq_id }`, client-only loss inputs dropped, every tensor with its `shape`).
 *
 * Datums built by `trajectoryToDatum` read their arrays from the trajectory (`TensorView`,
 * `TokensView`); while nothing has read them, they are checked and written from the trajectory's
 * arrays, never copied, and the token run that the model input and `target_tokens` share — the
 * same tokens, shifted by one — is serialised once. Any other datum is checked by
 * `validateLossInputs` and written by `JSON.stringify`.
 *
 * @module
 */
import { TensorView, TokensView, type ArrayWindow, type LazyValues } from "../../../types/datum-view.js";
import { LossInputError, validateLossInputs, type LossFunctionName } from "../../../types/losses.js";
import type { Datum, TensorData } from "../../../types/wire.js";
import { estimateDatumBytes } from "./chunks.js";
import { JsonWriter } from "./json-writer.js";
import { writeLazy, writeWindow } from "./number-json.js";

/** Loss-input keys nexrl datums may carry that Tinker rejects; they are removed before sending. */
const CLIENT_ONLY_KEYS = new Set(["mask", "loss_mask"]);

/** The one writer of every body: bodies are written synchronously, one at a time. */
const writer = new JsonWriter();

/** A datum checked against the loss contract, ready to be written. */
export interface CheckedDatum {
  /** Its size by the Tinker SDK's estimate (for chunking). */
  readonly bytes: number;
  /** Writes its JSON, as it appears in `data`. */
  write(out: JsonWriter): void;
}

/** The parts of a datum built by `trajectoryToDatum`, unread. */
interface Views {
  tokens: LazyValues;
  inputs: Array<[string, LazyValues, TensorData]>;
}

/** The loss inputs Tinker receives: all but the client-only keys, in their order. */
function sentInputs(datum: Datum): Record<string, TensorData> {
  const inputs: Record<string, TensorData> = {};
  for (const [key, tensor] of Object.entries(datum.loss_fn_inputs)) if (!CLIENT_ONLY_KEYS.has(key)) inputs[key] = tensor;
  return inputs;
}

/** The unread views behind a datum's tokens and loss inputs, or undefined unless every part is an untouched view. */
function untouchedViews(datum: Datum, inputs: Record<string, TensorData>): Views | undefined {
  const modelInput = datum.model_input;
  const chunk = modelInput.chunks.length === 1 && Object.keys(modelInput).length === 1 ? modelInput.chunks[0]! : undefined;
  if (chunk?.type !== "encoded_text" || Object.keys(chunk).length !== 2) return undefined;
  const tokens = TokensView.valuesOf(chunk);
  if (!tokens?.unread) return undefined;
  const views: Views["inputs"] = [];
  for (const [key, tensor] of Object.entries(inputs)) {
    const values = TensorView.valuesOf(tensor);
    if (!values?.unread || Object.keys(tensor).length !== 2) return undefined;
    views.push([key, values, tensor]);
  }
  return { tokens, inputs: views };
}

/** Whether every value is a finite number and, for `tokenIds`, a non-negative integer (the value checks of `validateLossInputs` on Tinker). */
function valuesPass(values: LazyValues, tokenIds: boolean): boolean {
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

/**
 * Checks a datum made of untouched views: undefined when a size or a value is wrong (the general
 * path then reports it, worded as ever), else the checked datum.
 * @throws LossInputError when it breaks a part of the contract that does not depend on values.
 */
function checkViews(views: Views, lossFn: LossFunctionName, config: Record<string, number> | undefined, bytes: number): CheckedDatum | undefined {
  const n = views.tokens.length;
  // The model input is not checked by the contract, but only finite numbers are written here.
  if (!valuesPass(views.tokens, false)) return undefined;
  for (const [key, values] of views.inputs) if (values.length !== n || !valuesPass(values, key === "target_tokens")) return undefined;
  // Sizes and values are right, so only the checks that do not read values can fail: names,
  // dtypes, the backend and the config. Run exactly those, on the datum with its values left out.
  const withoutValues: Record<string, TensorData> = {};
  for (const [key, , tensor] of views.inputs) withoutValues[key] = { data: [], dtype: tensor.dtype };
  validateLossInputs(lossFn, { model_input: { chunks: [] }, loss_fn_inputs: withoutValues }, { backend: "tinker", ...(config && { config }) });
  return { bytes, write: (out) => writeViews(out, views, withoutValues) };
}

/**
 * The array whose window `tokens[0..n-1]` is the model input and `tokens[1..n]` the
 * `target_tokens`, when they are so (as `trajectoryToDatum` builds them), with those targets.
 */
function sharedRun(views: Views): { window: ArrayWindow; targets: LazyValues } | undefined {
  const targets = views.inputs.find(([key]) => key === "target_tokens")?.[1];
  const a = views.tokens.source;
  const b = targets?.source;
  if (!b || !("window" in a) || !("window" in b) || a.window.array !== b.window.array || b.window.start !== a.window.start + 1) return undefined;
  return { window: a.window, targets: targets! };
}

/** Writes a checked datum of views; the token run shared by the model input and `target_tokens` is serialised once and copied. */
function writeViews(out: JsonWriter, views: Views, dtypes: Record<string, TensorData>): void {
  const n = views.tokens.length;
  const shared = sharedRun(views);
  let run: [number, number] | undefined;
  out.ascii('{"model_input":{"chunks":[{"type":"encoded_text","tokens":[');
  if (shared) {
    writeWindow(out, shared.window, 0, 1);
    if (n > 1) {
      out.comma();
      const start = out.position;
      writeWindow(out, shared.window, 1, n);
      run = [start, out.position];
    }
  } else {
    writeLazy(out, views.tokens);
  }
  out.ascii(']}]},"loss_fn_inputs":{');
  views.inputs.forEach(([key, values], i) => {
    if (i > 0) out.comma();
    out.json(key);
    out.ascii(':{"data":[');
    if (values === shared?.targets) {
      if (run) {
        out.again(run[0], run[1]);
        out.comma();
      }
      writeWindow(out, shared.window, n, n + 1);
    } else {
      writeLazy(out, values);
    }
    out.ascii('],"dtype":');
    out.json(dtypes[key]!.dtype);
    out.ascii(`,"shape":[${n}]}`);
  });
  out.ascii("}}");
}

/**
 * Checks `datum` against the contract of `lossFn` on Tinker, as Tinker receives it: client-only
 * keys (`mask`, `loss_mask`) removed, every tensor with its `shape`.
 * @throws LossInputError when the datum breaks the contract.
 */
export function checkDatum(datum: Datum, lossFn: LossFunctionName, config: Record<string, number> | undefined): CheckedDatum {
  const inputs = sentInputs(datum);
  const bytes = estimateDatumBytes({ model_input: datum.model_input, loss_fn_inputs: inputs });
  const views = untouchedViews(datum, inputs);
  const checked = views && checkViews(views, lossFn, config, bytes);
  if (checked) return checked;
  const wire: Datum = { model_input: datum.model_input, loss_fn_inputs: {} };
  for (const [key, tensor] of Object.entries(inputs)) wire.loss_fn_inputs[key] = { ...tensor, shape: tensor.shape ?? [tensor.data.length] };
  validateLossInputs(lossFn, wire, { backend: "tinker", ...(config && { config }) });
  return { bytes, write: (out) => out.json(wire) };
}

/**
 * Checks every datum of a `forward` / `forward_backward` call.
 * @throws LossInputError for the first datum that breaks the contract, or when there is none.
 */
export function checkDatums(data: readonly Datum[], lossFn: LossFunctionName, config: Record<string, number> | undefined): CheckedDatum[] {
  if (data.length === 0) throw new LossInputError(`${lossFn} on tinker: no datums were given; pass at least one`);
  return data.map((d) => checkDatum(d, lossFn, config));
}

/** The bytes of the body of one `forward` / `forward_backward` request carrying `data`. */
export function lossBody(
  inputKey: "forward_input" | "forward_backward_input",
  data: readonly CheckedDatum[],
  lossFn: LossFunctionName,
  config: Record<string, number> | undefined,
  modelId: string,
  seqId: number,
): Uint8Array {
  writer.clear();
  writer.ascii(`{"${inputKey}":{"data":[`);
  data.forEach((d, i) => {
    if (i > 0) writer.comma();
    d.write(writer);
  });
  writer.ascii('],"loss_fn":');
  writer.json(lossFn);
  if (config) {
    writer.ascii(',"loss_fn_config":');
    writer.json(config);
  }
  writer.ascii('},"model_id":');
  writer.json(modelId);
  writer.ascii(',"seq_id":');
  writer.json(seqId);
  writer.ascii("}");
  return writer.bytes();
}
