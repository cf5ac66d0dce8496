/**
 * The protobuf generation of the Tinker protocol on the server side: `forward_backward` bodies
 * sent as `application/x-protobuf` (optionally `Content-Encoding: zstd`), read into the JSON
 * shape the rest of the handler validates, and sample and forward_backward results answered as
 * protobuf to polls whose `Accept` names `application/x-protobuf` (SDK ≥ 0.18.1 asks for them;
 * 0.25 accepts nothing else).
 *
 * @module
 */
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  bfloat16Bytes,
  float32Bytes,
  int32Bytes,
  int64Bytes,
  readDtype,
  readInt32,
  readInt64,
} from "../wire/tinker-proto/arrays.js";
import {
  DType,
  ForwardBackwardOutputSchema,
  ForwardBackwardRequestSchema,
  SampleResponseSchema,
  StopReason,
  type Chunk,
  type Tensor,
} from "../wire/tinker-proto/tinker_public_pb.js";
import { zstdDecompress } from "../wire/tinker-proto/zstd.js";
import { MAX_BODY_BYTES } from "./io.js";
import { ProtocolError } from "../errors.js";

/** The content type of protobuf bodies and answers. */
export const PROTOBUF = "application/x-protobuf";

/** Answers 200 with protobuf bytes. */
export function sendProtobuf(res: ServerResponse, bytes: Uint8Array): void {
  res.writeHead(200, { "content-type": PROTOBUF, "content-length": bytes.byteLength });
  res.end(bytes);
}

/** Whether a request's body is protobuf (its `content-type`). */
export function isProtobufBody(headers: IncomingHttpHeaders): boolean {
  return headers["content-type"]?.split(";")[0]?.trim().toLowerCase() === PROTOBUF;
}

/** Whether a poll accepts protobuf results (`Accept` names `application/x-protobuf`). */
export function acceptsProtobuf(headers: IncomingHttpHeaders): boolean {
  return headers.accept?.toLowerCase().includes(PROTOBUF) ?? false;
}

/** A protobuf `forward_backward` body in the JSON shape, and whether it asks for the forward pass only. */
export interface DecodedForwardBackward {
  /** `{ forward_backward_input: { data, loss_fn, loss_fn_config }, model_id, seq_id }`, as the JSON generation sends it. */
  body: Record<string, unknown>;
  /** `forward_only`: run the forward pass without accumulating gradients. */
  forwardOnly: boolean;
}

function bad(message: string): ProtocolError {
  return new ProtocolError(message, { status: 400, code: "invalid_protobuf" });
}

/** The bytes of a body, decompressed when it came with `Content-Encoding: zstd`. */
export async function protobufBodyBytes(raw: Uint8Array, headers: IncomingHttpHeaders): Promise<Uint8Array> {
  const encoding = headers["content-encoding"]?.trim().toLowerCase();
  if (encoding === undefined || encoding === "" || encoding === "identity") return raw;
  if (encoding !== "zstd")
    throw new ProtocolError(
      `Content-Encoding ${encoding} is not supported; send the body as it is or zstd-compressed`,
      { status: 415, code: "unsupported_content_encoding" },
    );
  try {
    return await zstdDecompress(raw, MAX_BODY_BYTES);
  } catch (error) {
    throw bad(`the zstd body could not be decompressed: ${(error as Error).message}`);
  }
}

/** A model-input chunk in JSON. */
function chunkJson(chunk: Chunk, where: string): Record<string, unknown> {
  switch (chunk.chunk.case) {
    case "encodedText":
      return { type: "encoded_text", tokens: readInt32(chunk.chunk.value.tokens, `${where}.tokens`) };
    case "image": {
      const { data, format, expectedTokens } = chunk.chunk.value;
      return {
        type: "image",
        data: Buffer.from(data).toString("base64"),
        format,
        ...(expectedTokens !== undefined && { expected_tokens: expectedTokens }),
      };
    }
    case "dmel":
      throw bad(`${where}: dmel (audio) chunks are not supported by nexrl serve; send token chunks`);
    default:
      throw bad(`${where}: a model-input chunk is empty`);
  }
}

/** A loss-input tensor in JSON (`TensorData`): float32 / bfloat16 read as float32, int64 / int32 as int64. */
function tensorJson(tensor: Tensor, where: string): Record<string, unknown> {
  const dtype =
    tensor.dtype === DType.DTYPE_FLOAT32 || tensor.dtype === DType.DTYPE_BFLOAT16
      ? "float32"
      : tensor.dtype === DType.DTYPE_INT64 || tensor.dtype === DType.DTYPE_INT32
        ? "int64"
        : undefined;
  if (dtype === undefined) throw bad(`${where}: dtype ${tensor.dtype} is not float32, int64, int32 or bfloat16`);
  const shape = tensor.shape.map((n) => Number(n));
  switch (tensor.encoding.case) {
    case "dense":
      return { data: readDtype(tensor.encoding.value, tensor.dtype, `${where}.dense`), dtype, shape };
    case "sparseCsr": {
      const { values, crowIndices, colIndices } = tensor.encoding.value;
      return {
        data: readDtype(values, tensor.dtype, `${where}.sparse_csr.values`),
        dtype,
        shape,
        sparse_crow_indices: readInt64(crowIndices, `${where}.sparse_csr.crow_indices`),
        sparse_col_indices: readInt64(colIndices, `${where}.sparse_csr.col_indices`),
      };
    }
    default:
      throw bad(`${where}: the tensor has neither dense nor sparse_csr values`);
  }
}

/**
 * Reads a protobuf `ForwardBackwardRequest` into the JSON generation's body.
 * @throws {@link ProtocolError} 400 when the bytes are not such a message or hold values it cannot carry.
 */
export function decodeForwardBackward(bytes: Uint8Array): DecodedForwardBackward {
  let message;
  try {
    message = fromBinary(ForwardBackwardRequestSchema, bytes);
  } catch (error) {
    throw bad(`the body is not a tinker_public.ForwardBackwardRequest: ${(error as Error).message}`);
  }
  try {
    const data = message.data.map((datum, i) => ({
      model_input: { chunks: datum.modelInput.map((c, j) => chunkJson(c, `data[${i}].model_input[${j}]`)) },
      loss_fn_inputs: Object.fromEntries(
        Object.entries(datum.lossFnInputs).map(([key, t]) => [key, tensorJson(t, `data[${i}].loss_fn_inputs.${key}`)]),
      ),
    }));
    const config = Object.entries(message.lossFnConfig);
    return {
      body: {
        forward_backward_input: {
          data,
          loss_fn: message.lossFn,
          ...(config.length > 0 && { loss_fn_config: Object.fromEntries(config) }),
        },
        model_id: message.modelId,
        seq_id: message.seqId,
      },
      forwardOnly: message.forwardOnly,
    };
  } catch (error) {
    if (error instanceof ProtocolError) throw error;
    throw bad((error as Error).message);
  }
}

/** Element type of the float results (logprobs) in protobuf answers. */
export type ResultDtype = "float32" | "bfloat16";

/** A forward / forward_backward result (the JSON generation's answer) as a protobuf `ForwardBackwardOutput`. */
export function encodeForwardBackwardOutput(value: unknown, dtype: ResultDtype): Uint8Array {
  const output = value as {
    loss_fn_output_type: string;
    loss_fn_outputs: Array<Record<string, { data: number[] }>>;
    metrics: Record<string, number>;
  };
  const names = Object.keys(output.loss_fn_outputs[0] ?? {});
  const fields = Object.fromEntries(
    names.map((name) => {
      const values = output.loss_fn_outputs.map((o) => o[name]!.data);
      const size = dtype === "bfloat16" ? 2 : 4;
      const offsets = [0];
      for (const v of values) offsets.push(offsets.at(-1)! + v.length * size);
      const flat = values.flat();
      return [
        name,
        {
          data: dtype === "bfloat16" ? bfloat16Bytes(flat) : float32Bytes(flat),
          offsets: int64Bytes(offsets),
          dtype: dtype === "bfloat16" ? DType.DTYPE_BFLOAT16 : DType.DTYPE_FLOAT32,
          trailingShape: [],
        },
      ];
    }),
  );
  return toBinary(
    ForwardBackwardOutputSchema,
    create(ForwardBackwardOutputSchema, {
      lossFnOutputType: output.loss_fn_output_type,
      lossFnOutputs: [
        { typeTag: output.loss_fn_output_type, fields, numDatums: BigInt(output.loss_fn_outputs.length) },
      ],
      metrics: output.metrics,
    }),
  );
}

/** A sample result (the JSON generation's answer) as a protobuf `SampleResponse`; a null prompt logprob is NaN. */
export function encodeSampleResponse(value: unknown): Uint8Array {
  const output = value as {
    sequences: Array<{ stop_reason: "stop" | "length"; tokens: number[]; logprobs: number[] }>;
    prompt_logprobs?: Array<number | null>;
  };
  return toBinary(
    SampleResponseSchema,
    create(SampleResponseSchema, {
      sequences: output.sequences.map((s) => ({
        stopReason: s.stop_reason === "stop" ? StopReason.STOP : StopReason.LENGTH,
        tokens: int32Bytes(s.tokens),
        logprobs: float32Bytes(s.logprobs),
      })),
      ...(output.prompt_logprobs && {
        promptLogprobs: float32Bytes(output.prompt_logprobs.map((v) => v ?? Number.NaN)),
      }),
    }),
  );
}
