/**
 * Request bodies of the Tinker JSON protocol (wire-protocols §1.4) built from nexrl's types, and
 * the answers read back into them. `null` fields are omitted; defaults and `type` literals are
 * sent, as the Tinker SDK's pydantic models do.
 *
 * @module
 */
import { tensorValues, type ModelInput, type TensorData } from "../../wire/wire.js";
import type {
  ForwardBackwardOutput,
  LossFnOutput,
  OptimStepOutput,
  SampleOutput,
  SampledSequence,
  SamplingParams,
} from "../../contracts/training.js";
import { InputError, UnexpectedResponseError } from "../../errors.js";

function record(value: unknown, what: string): Record<string, unknown> {
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new UnexpectedResponseError(
      `${what}: expected a JSON object from the Tinker service, got ${JSON.stringify(value)?.slice(0, 200)}`,
    );
  return value as Record<string, unknown>;
}

function numbers(value: unknown, what: string): number[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === "number"))
    throw new UnexpectedResponseError(`${what}: expected a list of numbers from the Tinker service`);
  return value as number[];
}

/**
 * `sampling_params` of `asample`, Tinker's defaults filled in (temperature 1, top_k −1, top_p 1).
 * @throws InputError for stop strings and stop token ids in one list (Tinker takes one kind).
 */
export function samplingParams(params: SamplingParams): Record<string, unknown> {
  if (params.stop !== undefined && new Set(params.stop.map((s) => typeof s)).size > 1)
    throw new InputError(
      "a Tinker service takes stop strings or stop token ids, not both in one request; give one kind (decode the token ids with the tokenizer to stop on text)",
    );
  return {
    max_tokens: params.maxTokens,
    ...(params.seed !== undefined && { seed: params.seed }),
    ...(params.stop !== undefined && { stop: params.stop }),
    temperature: params.temperature ?? 1,
    top_k: params.topK === undefined || params.topK === 0 ? -1 : params.topK,
    top_p: params.topP ?? 1,
  };
}

/** An `asample` body. */
export function sampleBody(
  sessionId: string,
  seqId: number,
  prompt: ModelInput,
  numSamples: number,
  params: SamplingParams,
  promptLogprobs: boolean,
): Record<string, unknown> {
  return {
    sampling_session_id: sessionId,
    seq_id: seqId,
    num_samples: numSamples,
    prompt,
    sampling_params: samplingParams(params),
    prompt_logprobs: promptLogprobs,
    topk_prompt_logprobs: 0,
    type: "sample",
  };
}

/** Reads a `ForwardBackwardOutput`. */
export function readForwardBackward(body: unknown): ForwardBackwardOutput {
  const out = record(body, "forward_backward result");
  const outputs = out.loss_fn_outputs;
  if (!Array.isArray(outputs)) throw new UnexpectedResponseError("forward_backward result: loss_fn_outputs is missing");
  const lossFnOutputs = outputs.map((item, i) => {
    const fields: Record<string, number[]> = {};
    for (const [name, tensor] of Object.entries(record(item, `loss_fn_outputs[${i}]`))) {
      const t = record(tensor, `loss_fn_outputs[${i}].${name}`);
      fields[name] = tensorValues({
        ...(t as unknown as TensorData),
        data: numbers(t.data, `loss_fn_outputs[${i}].${name}.data`),
      });
    }
    if (!fields.logprobs)
      throw new UnexpectedResponseError(`forward_backward result: loss_fn_outputs[${i}] has no logprobs`);
    return fields as LossFnOutput;
  });
  return { lossFnOutputs, metrics: readMetrics(out.metrics) };
}

function readMetrics(value: unknown): Record<string, number> {
  if (value === undefined || value === null) return {};
  return Object.fromEntries(
    Object.entries(record(value, "metrics")).filter((entry): entry is [string, number] => typeof entry[1] === "number"),
  );
}

/** Reads an `OptimStepResponse` (`metrics` may be null). */
export function readOptimStep(body: unknown): OptimStepOutput {
  return { metrics: readMetrics(record(body, "optim_step result").metrics) };
}

/** Reads the `path` of a save answer. */
export function readPath(body: unknown, what: string): { path: string } {
  const path = record(body, what).path;
  if (typeof path !== "string") throw new UnexpectedResponseError(`${what}: the answer has no path`);
  return { path };
}

/** Reads a `SampleResponse`. */
export function readSample(body: unknown): SampleOutput & { promptLogprobs?: Array<number | null> } {
  const out = record(body, "sample result");
  if (!Array.isArray(out.sequences)) throw new UnexpectedResponseError("sample result: sequences is missing");
  const sequences = out.sequences.map((s, i): SampledSequence => {
    const seq = record(s, `sequences[${i}]`);
    const stopReason = seq.stop_reason;
    if (stopReason !== "stop" && stopReason !== "length")
      throw new UnexpectedResponseError(
        `sample result: sequences[${i}].stop_reason is ${JSON.stringify(stopReason)}, expected "stop" or "length"`,
      );
    return {
      tokens: numbers(seq.tokens, `sequences[${i}].tokens`),
      logprobs: numbers(seq.logprobs ?? [], `sequences[${i}].logprobs`),
      stopReason,
    };
  });
  const prompt = out.prompt_logprobs;
  if (prompt === undefined || prompt === null) return { sequences };
  if (!Array.isArray(prompt) || !prompt.every((v) => v === null || typeof v === "number"))
    throw new UnexpectedResponseError("sample result: prompt_logprobs must be numbers or null");
  return { sequences, promptLogprobs: prompt as Array<number | null> };
}
