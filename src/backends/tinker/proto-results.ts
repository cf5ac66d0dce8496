/**
 * Results of the protobuf generation (`retrieve_future` answered `application/x-protobuf`), read
 * as the Tinker SDK's `proto/response_conv.py` reads them: `SampleResponse` (int32 tokens,
 * float32 logprobs, NaN for a missing prompt logprob) and `ForwardBackwardOutput` (per-datum
 * slices of each `ArrayRecord` field, cut at its int64 byte offsets, in float32, int64, int32
 * or bfloat16).
 *
 * @module
 */
import { fromBinary } from "@bufbuild/protobuf";
import { DTYPE_BYTES, readDtype, readFloat32, readInt32, readInt64 } from "../../wire/tinker-proto/arrays.js";
import {
  ForwardBackwardOutputSchema,
  SampleResponseSchema,
  StopReason,
  type BatchedTensor,
} from "../../wire/tinker-proto/tinker_public_pb.js";
import type { ForwardBackwardOutput, LossFnOutput, SampleOutput, SampledSequence } from "../../contracts/training.js";
import { readForwardBackward, readSample } from "./wire.js";
import { InputError, UnexpectedResponseError } from "../../errors.js";

/** Runs `read`, reporting a malformed message as an {@link UnexpectedResponseError}. */
function decoding<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof UnexpectedResponseError) throw error;
    throw new UnexpectedResponseError(
      `${what}: the protobuf answer of the Tinker service could not be read (${(error as Error).message})`,
      { cause: error },
    );
  }
}

/** The per-datum value arrays of one batched field. */
function datumSlices(tensor: BatchedTensor, what: string): number[][] {
  const size = DTYPE_BYTES[tensor.dtype];
  if (!size) throw new InputError(`${what}: unsupported dtype ${tensor.dtype}`);
  const offsets = readInt64(tensor.offsets, `${what}.offsets`);
  const values = readDtype(tensor.data, tensor.dtype, `${what}.data`);
  const slices: number[][] = [];
  for (let i = 0; i + 1 < offsets.length; i++) {
    const [start, end] = [offsets[i]!, offsets[i + 1]!];
    if (start % size !== 0 || end % size !== 0 || start > end || end > tensor.data.byteLength)
      throw new InputError(
        `${what}: datum ${i} spans bytes ${start}..${end}, not whole values within the ${tensor.data.byteLength} bytes of data`,
      );
    slices.push(values.slice(start / size, end / size));
  }
  return slices;
}

/** Reads a protobuf `ForwardBackwardOutput`. */
export function readForwardBackwardProto(bytes: Uint8Array): ForwardBackwardOutput {
  return decoding("forward_backward result", () => {
    const message = fromBinary(ForwardBackwardOutputSchema, bytes);
    const fields = new Map<string, number[][]>();
    message.lossFnOutputs.forEach((record, r) => {
      for (const [name, tensor] of Object.entries(record.fields))
        fields.set(name, [...(fields.get(name) ?? []), ...datumSlices(tensor, `loss_fn_outputs[${r}].${name}`)]);
    });
    let count = message.lossFnOutputs.reduce((n, record) => n + Number(record.numDatums), 0);
    if (count === 0) count = fields.values().next().value?.length ?? 0;
    const lossFnOutputs: LossFnOutput[] = [];
    for (let i = 0; i < count; i++) {
      const output: Record<string, number[]> = {};
      for (const [name, slices] of fields) {
        const slice = slices[i];
        if (!slice)
          throw new UnexpectedResponseError(
            `forward_backward result: field ${name} has ${slices.length} datums, the result ${count}`,
          );
        output[name] = slice;
      }
      if (!output.logprobs) throw new UnexpectedResponseError(`forward_backward result: datum ${i} has no logprobs`);
      lossFnOutputs.push(output as LossFnOutput);
    }
    return { lossFnOutputs, metrics: { ...message.metrics } };
  });
}

/** Reads a protobuf `SampleResponse` (a missing prompt logprob, NaN on the wire, reads as null). */
export function readSampleProto(bytes: Uint8Array): SampleOutput & { promptLogprobs?: Array<number | null> } {
  return decoding("sample result", () => {
    const message = fromBinary(SampleResponseSchema, bytes);
    const sequences = message.sequences.map((s, i): SampledSequence => {
      if (s.stopReason !== StopReason.STOP && s.stopReason !== StopReason.LENGTH)
        throw new UnexpectedResponseError(`sample result: sequences[${i}] has the unknown stop_reason ${s.stopReason}`);
      const tokens = readInt32(s.tokens, `sequences[${i}].tokens`);
      const logprobs = s.logprobs === undefined ? [] : readFloat32(s.logprobs, `sequences[${i}].logprobs`);
      return { tokens, logprobs, stopReason: s.stopReason === StopReason.STOP ? "stop" : "length" };
    });
    if (message.promptLogprobs === undefined || message.promptLogprobs.byteLength === 0) return { sequences };
    const promptLogprobs = readFloat32(message.promptLogprobs, "prompt_logprobs").map((v) =>
      Number.isNaN(v) ? null : v,
    );
    return { sequences, promptLogprobs };
  });
}

/** A forward / forward_backward result, protobuf (bytes) or JSON (parsed), whichever the server answered. */
export function forwardBackwardResult(body: unknown): ForwardBackwardOutput {
  return body instanceof Uint8Array ? readForwardBackwardProto(body) : readForwardBackward(body);
}

/** A sample result, protobuf (bytes) or JSON (parsed), whichever the server answered. */
export function sampleResult(body: unknown): SampleOutput & { promptLogprobs?: Array<number | null> } {
  return body instanceof Uint8Array ? readSampleProto(body) : readSample(body);
}
