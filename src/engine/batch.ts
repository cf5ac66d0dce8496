/**
 * Turns the datums of a `forward`/`forward_backward` call into a {@link PackedBatch} plus each
 * datum's loss inputs, after checking them against the loss contract and the model.
 *
 * @module
 * @internal
 */
import { getLossFunction, type BuiltinLossContract } from "../contracts/losses.js";
import type { LossInputValues } from "../wire/loss-math.js";
import { validateLossInputs } from "../contracts/loss-validation.js";
import { modelInputTokens, tensorValues, type Datum } from "../wire/wire.js";
import type { ResolvedModelConfig } from "./config.js";
import type { PackedBatch } from "./transformer.js";
import { ContextLengthError, InputError } from "../errors.js";

/** A checked batch ready for the model and the loss. */
export interface PreparedBatch {
  /** The loss contract whose reference implementation computes the loss. */
  loss: BuiltinLossContract;
  /** The stacked sequences. */
  batch: PackedBatch;
  /** Loss inputs of each datum, by name. */
  inputs: LossInputValues[];
}

/** The contract of `lossFn` if the local engine implements it. */
function localLoss(lossFn: string): BuiltinLossContract {
  const contract = getLossFunction(lossFn);
  if (contract.serverDefined) {
    throw new InputError(
      `${lossFn} is defined by the Weaver server and is not available on the local engine; use cross_entropy, importance_sampling, ppo, cispo or dro`,
    );
  }
  return contract;
}

function checkIds(ids: ArrayLike<number>, vocabSize: number, what: string): void {
  for (let t = 0; t < ids.length; t++) {
    const id = ids[t]!;
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new InputError(
        `${what}[${t}] is ${id}, outside the model's vocabulary 0..${vocabSize - 1}; tokenize with the engine's tokenizer`,
      );
    }
  }
}

/**
 * Validates `datums` for `lossFn` on the local backend and packs them.
 * @throws InputError for inputs that break the loss contract, {@link "nexrl/errors".ContextLengthError | ContextLengthError} for a
 * datum longer than the context, {@link "nexrl".InputError | InputError} for ids outside the vocabulary.
 */
export function prepareBatch(
  datums: readonly Datum[],
  lossFn: string,
  lossFnConfig: Readonly<Record<string, number>> | undefined,
  config: ResolvedModelConfig,
): PreparedBatch {
  const loss = localLoss(lossFn);
  const tokenLists: number[][] = [];
  const targetLists: number[][] = [];
  const inputs: LossInputValues[] = [];
  datums.forEach((d, i) => {
    validateLossInputs(lossFn, d, { backend: "local", ...(lossFnConfig ? { config: lossFnConfig } : {}) });
    const tokens = modelInputTokens(d.model_input);
    if (tokens.length > config.contextLength) {
      throw ContextLengthError.fromLengths(
        `datum ${i}`,
        tokens.length,
        config.contextLength,
        "truncate or split it, or use a model with a larger contextLength",
      );
    }
    const values: LossInputValues = {};
    for (const key of Object.keys(loss.inputs)) values[key] = tensorValues(d.loss_fn_inputs[key]!);
    checkIds(tokens, config.vocabSize, `datum ${i} model_input token`);
    checkIds(values.target_tokens!, config.vocabSize, `datum ${i} target_tokens`);
    tokenLists.push(tokens);
    targetLists.push(Array.from(values.target_tokens!));
    inputs.push(values);
  });
  const rows = tokenLists.reduce((n, t) => n + t.length, 0);
  const batch: PackedBatch = {
    rows,
    tokens: new Int32Array(rows),
    targets: new Int32Array(rows),
    starts: new Int32Array(datums.length + 1),
  };
  let r = 0;
  tokenLists.forEach((tokens, s) => {
    batch.starts[s] = r;
    batch.tokens.set(tokens, r);
    batch.targets.set(targetLists[s]!, r);
    r += tokens.length;
  });
  batch.starts[datums.length] = r;
  return { loss, batch, inputs };
}

/** The sequences `first` to `end − 1` of `batch`, as a batch of their own (views, no copies of tokens). */
export function sliceBatch(batch: PackedBatch, first: number, end: number): PackedBatch {
  const r0 = batch.starts[first]!;
  const r1 = batch.starts[end]!;
  return {
    rows: r1 - r0,
    tokens: batch.tokens.subarray(r0, r1),
    targets: batch.targets.subarray(r0, r1),
    starts: batch.starts.slice(first, end + 1).map((r) => r - r0),
  };
}
