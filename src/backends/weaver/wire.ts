/**
 * Weaver request bodies built from nexrl's types (nested-list tensors, `loss_mask` for
 * `importance_sampling`, string-only stops) and answers read back case-insensitively.
 *
 * @module
 */
import { type LossFunctionName } from "../../contracts/losses.js";
import { validateLossInputs } from "../../contracts/loss-validation.js";
import { tensorValues, type Datum, type TensorData } from "../../wire/wire.js";
import type { ForwardBackwardOutput, SampleOutput, SampledSequence, SamplingParams } from "../../contracts/training.js";
import { field, numberList, object } from "./fields.js";
import { InputError, UnexpectedResponseError } from "../../errors.js";

/**
 * A tensor as Weaver receives it: `data` as (nested) lists shaped like the tensor, no `shape`
 * field. The loss contracts take one value per position, so the lists are flat.
 */
export interface WeaverTensor {
  /** The values. */
  data: number[];
  /** Element type. */
  dtype: TensorData["dtype"];
}

/**
 * The datums as Weaver receives them: `loss_mask` added for `importance_sampling` when missing
 * (1 where the advantage is not 0), each checked against the loss contract for Weaver, tensors
 * as lists without `shape` (sparse ones densified).
 * @throws InputError when a datum breaks the contract, or there is no datum.
 */
export function weaverDatums(
  data: readonly Datum[],
  lossFn: LossFunctionName,
): Array<{ model_input: Datum["model_input"]; loss_fn_inputs: Record<string, WeaverTensor> }> {
  if (data.length === 0) throw new InputError(`${lossFn} on weaver: no datums were given; pass at least one`);
  return data.map((d) => {
    const inputs = { ...d.loss_fn_inputs };
    const advantages = inputs.advantages;
    if (lossFn === "importance_sampling" && !inputs.loss_mask && advantages) {
      inputs.loss_mask = {
        data: tensorValues(advantages).map((a) => (a !== 0 ? 1 : 0)),
        dtype: "float32",
        ...(advantages.shape && { shape: advantages.shape }),
      };
    }
    validateLossInputs(lossFn, { model_input: d.model_input, loss_fn_inputs: inputs }, { backend: "weaver" });
    return {
      model_input: d.model_input,
      loss_fn_inputs: Object.fromEntries(
        Object.entries(inputs).map(([k, t]) => [k, { data: tensorValues(t), dtype: t.dtype }]),
      ),
    };
  });
}

/**
 * Weaver's `sampling_params`.
 * @throws InputError for stop token ids (Weaver takes stop strings only).
 */
export function weaverSamplingParams(params: SamplingParams): Record<string, unknown> {
  const { stop } = params;
  if (stop?.some((s) => typeof s !== "string")) {
    throw new InputError(
      "Weaver takes stop strings only, not token ids; pass the stop sequences as text (decode the token ids with the tokenizer)",
    );
  }
  return {
    temperature: params.temperature ?? 1,
    top_p: params.topP ?? 1,
    top_k: params.topK === undefined || params.topK === 0 ? -1 : params.topK,
    max_tokens: params.maxTokens,
    // The SDK leaves an empty stop list out.
    ...(stop !== undefined && stop.length > 0 && { stop }),
    ...(params.seed !== undefined && { seed: params.seed }),
  };
}

/** The `result` of an operation's response (or the response itself when it has none). */
function result(response: unknown, what: string): Record<string, unknown> {
  return object(field(response, "result") ?? response, what);
}

/** Keys summed across Weaver task results; the rest are averaged (as NexRL aggregates them). */
const summed = (key: string): boolean => key === "tokens" || key.endsWith(":sum");

function metricsOf(value: unknown): Record<string, number> {
  if (!value || typeof value !== "object") return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, number] => typeof e[1] === "number"));
}

/** The metrics of a loss pass: `result.metrics`, or aggregated over `forward_backward_task_results`. */
function lossMetrics(res: Record<string, unknown>): Record<string, number> {
  const direct = field(res, "metrics");
  if (direct) return metricsOf(direct);
  const tasks = Object.values(
    object(field(res, "forward_backward_task_results") ?? {}, "forward_backward_task_results"),
  ).map((t) => metricsOf(field(t, "metrics")));
  const out: Record<string, number> = {};
  for (const key of new Set(tasks.flatMap((m) => Object.keys(m)))) {
    const values = tasks.filter((m) => key in m).map((m) => m[key]!);
    const total = values.reduce((a, b) => a + b, 0);
    out[key] = summed(key) ? total : total / values.length;
  }
  return out;
}

/** Reads the response of a forward or forward-backward operation. */
export function readLossPass(response: unknown): ForwardBackwardOutput {
  const res = result(response, "forward_backward result");
  const outputs = field(res, "loss_fn_outputs");
  if (!Array.isArray(outputs)) throw new UnexpectedResponseError("forward_backward result: loss_fn_outputs is missing");
  return {
    lossFnOutputs: outputs.map((o, i) => {
      const fields = Object.fromEntries(
        Object.entries(object(o, `loss_fn_outputs[${i}]`)).map(([name, v]) => [
          name.toLowerCase() === "logprobs" ? "logprobs" : name,
          numberList(v, `loss_fn_outputs[${i}].${name}`),
        ]),
      );
      if (!fields.logprobs)
        throw new UnexpectedResponseError(`forward_backward result: loss_fn_outputs[${i}] has no logprobs`);
      return fields as ForwardBackwardOutput["lossFnOutputs"][number];
    }),
    metrics: lossMetrics(res),
  };
}

/** Reads the response of an optimizer step. */
export function readOptimStep(response: unknown): { metrics: Record<string, number> } {
  return { metrics: metricsOf(field(result(response, "optim_step result"), "metrics")) };
}

const STOP_REASONS = new Set(["stop", "length", "abort"]);

/** Reads the response of a sample operation. */
export function readSample(response: unknown): SampleOutput {
  const sequences = field(result(response, "sample result"), "sequences");
  if (!Array.isArray(sequences)) throw new UnexpectedResponseError("sample result: sequences is missing");
  return {
    sequences: sequences.map((s, i): SampledSequence => {
      const stopReason = field(s, "stop_reason");
      if (typeof stopReason !== "string" || !STOP_REASONS.has(stopReason)) {
        throw new UnexpectedResponseError(
          `sample result: sequences[${i}].stop_reason is ${JSON.stringify(stopReason)}, expected stop, length or abort`,
        );
      }
      return {
        tokens: numberList(field(s, "tokens"), `sequences[${i}].tokens`),
        logprobs: numberList(field(s, "logprobs") ?? [], `sequences[${i}].logprobs`),
        stopReason: stopReason as SampledSequence["stopReason"],
      };
    }),
  };
}

/** Reads the `prompt_logprobs` of a logprobs operation (index 0 is null). */
export function readPromptLogprobs(response: unknown): Array<number | null> {
  const values = field(result(response, "logprobs result"), "prompt_logprobs");
  if (!Array.isArray(values) || !values.every((v) => v === null || typeof v === "number"))
    throw new UnexpectedResponseError("logprobs result: prompt_logprobs must be numbers or null");
  return values as Array<number | null>;
}
