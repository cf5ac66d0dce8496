/**
 * The JSON bodies of `forward` and `forward_backward` (wire-protocols §1.4), serialised by the
 * client: every datum is checked against the loss contract before anything is written, each body
 * is written once, and the same bytes are sent on every attempt. They are exactly the UTF-8 of
 * `JSON.stringify` of the documented body (`{ <input key>: { data, loss_fn, loss_fn_config? },
 * model_id, seq_id }`, client-only loss inputs dropped, every tensor with its `shape`).
 *
 * Number arrays are written from where their values are (`datum-parts.ts`, `number-json.ts`):
 * the trajectory's own arrays for an untouched datum of `trajectoryToDatum`, which is never
 * copied, else the datum's arrays. When `target_tokens` are the model input's tokens shifted by
 * one, as in every datum of a sequence, the run they share is serialised once and copied.
 *
 * @module
 */
import { validateLossInputs, type LossFunctionName } from "../../../types/losses.js";
import type { Datum, TensorData } from "../../../types/wire.js";
import { estimateDatumBytes, estimateDatumProtoBytes } from "./chunks.js";
import { plainParts, viewParts, type DatumParts } from "./datum-parts.js";
import { JsonWriter } from "./json-writer.js";
import { writeValues, writeWindow, type SourcedValues } from "./number-json.js";
import { InputError } from "../../../errors.js";

/** Loss-input keys nexrl datums may carry that Tinker rejects; they are removed before sending. */
const CLIENT_ONLY_KEYS = new Set(["mask", "loss_mask"]);

/** The one writer of every body: bodies are written synchronously, one at a time. */
const writer = new JsonWriter();

/** A datum checked against the loss contract, ready to be written as JSON or protobuf. */
export interface CheckedDatum {
  /** Its size by the JSON-generation SDK's estimate (for chunking JSON bodies). */
  readonly bytes: number;
  /** Its size by the protobuf-generation SDK's estimate (for chunking protobuf bodies). */
  readonly protoBytes: number;
  /** The datum its parts come from (its model input is written from it when `parts.tokens` is undefined). */
  readonly datum: Datum;
  /** What is sent: the token run and the loss inputs, with where their values are. */
  readonly parts: DatumParts;
  /** Writes its JSON, as it appears in `data`. */
  write(out: JsonWriter): void;
}

/** The loss inputs Tinker receives: all but the client-only keys, in their order. */
function sentInputs(datum: Datum): Record<string, TensorData> {
  const inputs: Record<string, TensorData> = {};
  for (const [key, tensor] of Object.entries(datum.loss_fn_inputs))
    if (!CLIENT_ONLY_KEYS.has(key)) inputs[key] = tensor;
  return inputs;
}

/** Whether `targets` are `tokens` shifted by one: `targets[j] = tokens[j + 1]` for every `j < n - 1`. */
function shiftedByOne(tokens: SourcedValues, targets: SourcedValues): boolean {
  const a = tokens.source;
  const b = targets.source;
  if (!("window" in a) || !("window" in b) || tokens.length !== targets.length) return false;
  if (a.window.array === b.window.array && b.window.start === a.window.start + 1) return true;
  const { array: x, start: i0 } = a.window;
  const { array: y, start: j0 } = b.window;
  for (let j = 0; j < targets.length - 1; j++) if (y[j0 + j] !== x[i0 + j + 1]) return false;
  return true;
}

/** Writes a checked datum from its parts. */
function writeDatum(out: JsonWriter, datum: Datum, parts: DatumParts): void {
  const { tokens } = parts;
  const targets = parts.inputs.find(([key]) => key === "target_tokens")?.[1];
  const shared =
    tokens && targets && shiftedByOne(tokens, targets) && "window" in tokens.source ? tokens.source.window : undefined;
  const n = tokens?.length ?? 0;
  let run: [number, number] | undefined;
  out.ascii('{"model_input":');
  if (!tokens) {
    out.json(datum.model_input);
  } else {
    out.ascii('{"chunks":[{"type":"encoded_text","tokens":[');
    if (shared && n > 1) {
      writeWindow(out, shared, 0, 1);
      out.comma();
      const start = out.position;
      writeWindow(out, shared, 1, n);
      run = [start, out.position];
    } else {
      writeValues(out, tokens);
    }
    out.ascii("]}]}");
  }
  out.ascii(',"loss_fn_inputs":{');
  parts.inputs.forEach(([key, values, tensor], i) => {
    if (i > 0) out.comma();
    out.json(key);
    out.ascii(":");
    if (!values) return out.json(tensor);
    out.ascii('{"data":[');
    if (values === targets && run && "window" in values.source) {
      out.again(run[0], run[1]);
      out.comma();
      writeWindow(out, values.source.window, n - 1, n);
    } else {
      writeValues(out, values);
    }
    out.ascii('],"dtype":');
    out.json(tensor.dtype);
    out.ascii(`,"shape":[${values.length}]}`);
  });
  out.ascii("}}");
}

/**
 * Checks `datum` against the contract of `lossFn` on Tinker, as Tinker receives it: client-only
 * keys (`mask`, `loss_mask`) removed, every tensor with its `shape`.
 * @throws InputError when the datum breaks the contract.
 */
function checkDatum(datum: Datum, lossFn: LossFunctionName, config: Record<string, number> | undefined): CheckedDatum {
  const inputs = sentInputs(datum);
  const sent = { model_input: datum.model_input, loss_fn_inputs: inputs };
  const bytes = estimateDatumBytes(sent);
  const protoBytes = estimateDatumProtoBytes(sent);
  const views = viewParts(datum, inputs, lossFn, config);
  if (views) return { bytes, protoBytes, datum, parts: views, write: (out) => writeDatum(out, datum, views) };
  const wire: Datum = { model_input: datum.model_input, loss_fn_inputs: {} };
  for (const [key, tensor] of Object.entries(inputs))
    wire.loss_fn_inputs[key] = { ...tensor, shape: tensor.shape ?? [tensor.data.length] };
  validateLossInputs(lossFn, wire, { backend: "tinker", ...(config && { config }) });
  const parts = plainParts(wire, inputs);
  return { bytes, protoBytes, datum: wire, parts, write: (out) => writeDatum(out, wire, parts) };
}

/**
 * Checks every datum of a `forward` / `forward_backward` call.
 * @throws InputError for the first datum that breaks the contract, or when there is none.
 */
export function checkDatums(
  data: readonly Datum[],
  lossFn: LossFunctionName,
  config: Record<string, number> | undefined,
): CheckedDatum[] {
  if (data.length === 0) throw new InputError(`${lossFn} on tinker: no datums were given; pass at least one`);
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
