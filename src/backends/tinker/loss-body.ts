/**
 * The datums of `forward` and `forward_backward` as Tinker receives them, checked against the
 * loss contract before anything is sent, and their JSON bodies (wire-protocols §1.4): exactly
 * `JSON.stringify` of `{ <input key>: { data, loss_fn, loss_fn_config? }, model_id, seq_id }`,
 * serialised once, so that a retry or a resubmission sends the same bytes.
 *
 * @module
 */
import { type LossFunctionName } from "../../contracts/losses.js";
import { validateLossInputs } from "../../contracts/loss-validation.js";
import { InputError } from "../../errors.js";
import type { Datum } from "../../wire/wire.js";
import { estimateDatumBytes, estimateDatumProtoBytes } from "./chunks.js";

/** Loss-input keys nexrl datums may carry that Tinker rejects; they are removed before sending. */
const CLIENT_ONLY_KEYS = new Set(["mask", "loss_mask"]);

/** A datum checked against the loss contract, as it is sent in either wire generation. */
export interface CheckedDatum {
  /** The datum as Tinker receives it: client-only loss inputs removed, every tensor with its `shape`. */
  readonly datum: Datum;
  /** Its size by the JSON-generation SDK's estimate (for chunking JSON bodies). */
  readonly bytes: number;
  /** Its size by the protobuf-generation SDK's estimate (for chunking protobuf bodies). */
  readonly protoBytes: number;
}

/**
 * Checks every datum of a `forward` / `forward_backward` call against the contract of `lossFn`
 * on Tinker, as Tinker receives it.
 * @throws InputError for the first datum that breaks the contract, or when there is none.
 */
export function checkDatums(
  data: readonly Datum[],
  lossFn: LossFunctionName,
  config: Record<string, number> | undefined,
): CheckedDatum[] {
  if (data.length === 0) throw new InputError(`${lossFn} on tinker: no datums were given; pass at least one`);
  return data.map((d) => {
    const datum: Datum = { model_input: d.model_input, loss_fn_inputs: {} };
    for (const [key, tensor] of Object.entries(d.loss_fn_inputs)) {
      if (!CLIENT_ONLY_KEYS.has(key))
        datum.loss_fn_inputs[key] = { ...tensor, shape: tensor.shape ?? [tensor.data.length] };
    }
    validateLossInputs(lossFn, datum, { backend: "tinker", ...(config && { config }) });
    return { datum, bytes: estimateDatumBytes(datum), protoBytes: estimateDatumProtoBytes(datum) };
  });
}

/** The JSON body of one `forward` / `forward_backward` request carrying `data`. */
export function lossBody(
  inputKey: "forward_input" | "forward_backward_input",
  data: readonly CheckedDatum[],
  lossFn: LossFunctionName,
  config: Record<string, number> | undefined,
  modelId: string,
  seqId: number,
): string {
  return JSON.stringify({
    [inputKey]: { data: data.map((d) => d.datum), loss_fn: lossFn, ...(config && { loss_fn_config: config }) },
    model_id: modelId,
    seq_id: seqId,
  });
}
