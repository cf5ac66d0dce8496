/**
 * Limits `nexrl serve` applies to every protocol before any work starts: samples per request,
 * and sequences longer than the model's context. Both are the client's mistake, answered with a
 * 400 that says what the limit is, rather than a failure found (or a stall caused) later.
 *
 * @module
 */
import { modelInputLength, type ModelInput } from "../wire/wire.js";
import { ProtocolError } from "../errors.js";

/** Most samples one request may ask for (Tinker and Weaver `num_samples`, OpenAI `n`). */
export const MAX_SAMPLES_PER_REQUEST = 128;

/**
 * @throws {@link ProtocolError} 400 `too_many_samples` when `n` is over {@link MAX_SAMPLES_PER_REQUEST}.
 */
export function checkSampleCount(n: number, field: string): void {
  if (n > MAX_SAMPLES_PER_REQUEST)
    throw new ProtocolError(
      `${field} is ${n}; nexrl serve samples at most ${MAX_SAMPLES_PER_REQUEST} sequences per request (like the OpenAI endpoint's n): send several requests`,
      { status: 400, code: "too_many_samples" },
    );
}

/**
 * @param inputs the model inputs of a request (a prompt, or each datum's input), with names for the message.
 * @throws {@link ProtocolError} 400 `context_length_exceeded` for the first longer than `contextLength`.
 */
export function checkContextLength(
  inputs: ReadonlyArray<{ what: string; input: ModelInput }>,
  contextLength: number,
): void {
  for (const { what, input } of inputs) {
    const length = modelInputLength(input);
    if (length > contextLength)
      throw new ProtocolError(
        `${what} has ${length} tokens but the model's context length is ${contextLength}; shorten it or use a model with a longer context`,
        { status: 400, code: "context_length_exceeded" },
      );
  }
}

/** The model inputs of `datums`, named `datum 0`, `datum 1`, … for {@link checkContextLength}. */
export function datumInputs(
  datums: ReadonlyArray<{ model_input: ModelInput }>,
): Array<{ what: string; input: ModelInput }> {
  return datums.map((d, i) => ({ what: `datum ${i}`, input: d.model_input }));
}
