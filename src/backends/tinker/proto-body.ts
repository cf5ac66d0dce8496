/**
 * The protobuf body of `forward_backward` (`tinker_public.ForwardBackwardRequest`), as the Tinker
 * SDK's `proto/request_conv.py` writes it: each datum's `encoded_text` tokens as int32 bytes,
 * images as their bytes, every loss input as a dense tensor in its dtype (float32 or int64) with
 * its shape, or as sparse CSR with int64 indices; `loss_fn_config` as doubles; `forward_only` for
 * `forward`. Written from the checked datums of `loss-body.ts`.
 *
 * @module
 */
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { InputError } from "../../errors.js";
import { float32Bytes, int32Bytes, int64Bytes } from "../../wire/tinker-proto/arrays.js";
import {
  DType,
  ForwardBackwardRequestSchema,
  type ChunkSchema,
  type DatumSchema,
  type TensorSchema,
} from "../../wire/tinker-proto/tinker_public_pb.js";
import type { ModelInputChunk, TensorData } from "../../wire/wire.js";
import type { CheckedDatum } from "./loss-body.js";

type ChunkInit = MessageInitShape<typeof ChunkSchema>["chunk"];
type TensorInit = MessageInitShape<typeof TensorSchema>;
type DatumInit = MessageInitShape<typeof DatumSchema>;

const INT32_MAX = 2 ** 31 - 1;

/** `tokens` as int32 bytes. @throws {@link "nexrl/errors".InputError | InputError} for ids that are not int32 integers. */
function tokenBytes(tokens: ArrayLike<number>, datumIndex: number): Uint8Array {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!Number.isInteger(t) || t < 0 || t > INT32_MAX)
      throw new InputError(
        `datum ${datumIndex}: model_input token ${i} is ${t}; token ids must be integers from 0 to 2^31-1`,
      );
  }
  return int32Bytes(tokens);
}

/** A model-input chunk as the protobuf `Chunk` oneof. */
function chunkOf(chunk: ModelInputChunk, datumIndex: number): ChunkInit {
  switch (chunk.type) {
    case "encoded_text":
      return { case: "encodedText", value: { tokens: tokenBytes(chunk.tokens, datumIndex) } };
    case "image":
      return {
        case: "image",
        value: {
          data: Buffer.from(chunk.data, "base64"),
          format: chunk.format,
          ...(chunk.expected_tokens !== undefined && { expectedTokens: chunk.expected_tokens }),
        },
      };
    case "image_asset_pointer":
      throw new InputError(
        `datum ${datumIndex}: an image_asset_pointer chunk cannot be sent in the protobuf generation of the Tinker protocol (it has no such chunk); send the image's bytes as an image chunk, or speak the JSON generation (wire: json)`,
      );
  }
}

/** A loss input as a protobuf `Tensor`: dense in its dtype, or sparse CSR; its shape always given. */
function tensorOf(tensor: TensorData): TensorInit {
  const values = tensor.data;
  const encode = tensor.dtype === "int64" ? int64Bytes : float32Bytes;
  const shape = (tensor.shape ?? [values.length]).map((n) => BigInt(n));
  const dtype = tensor.dtype === "int64" ? DType.DTYPE_INT64 : DType.DTYPE_FLOAT32;
  const encoding: TensorInit["encoding"] =
    tensor.sparse_crow_indices !== undefined
      ? {
          case: "sparseCsr",
          value: {
            values: encode(values),
            crowIndices: int64Bytes(tensor.sparse_crow_indices),
            colIndices: int64Bytes(tensor.sparse_col_indices ?? []),
          },
        }
      : { case: "dense", value: encode(values) };
  return { encoding, dtype, shape };
}

/** One checked datum as a protobuf `Datum`. */
function datumOf({ datum }: CheckedDatum, datumIndex: number): DatumInit {
  const lossFnInputs: Record<string, TensorInit> = {};
  for (const [key, tensor] of Object.entries(datum.loss_fn_inputs)) lossFnInputs[key] = tensorOf(tensor);
  return { modelInput: datum.model_input.chunks.map((c) => ({ chunk: chunkOf(c, datumIndex) })), lossFnInputs };
}

/** The bytes of one protobuf `forward_backward` request carrying `data`. */
export function protoLossBody(
  data: readonly CheckedDatum[],
  lossFn: string,
  config: Record<string, number> | undefined,
  modelId: string,
  seqId: number,
  forwardOnly: boolean,
): Uint8Array {
  const message = create(ForwardBackwardRequestSchema, {
    modelId,
    seqId,
    data: data.map(datumOf),
    lossFn,
    lossFnConfig: { ...config },
    forwardOnly,
  });
  return toBinary(ForwardBackwardRequestSchema, message);
}
