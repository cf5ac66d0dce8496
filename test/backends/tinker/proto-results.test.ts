import { describe, expect, it } from "vitest";
import {
  forwardBackwardResult,
  readForwardBackwardProto,
  readSampleProto,
  sampleResult,
} from "../../../src/backends/tinker/proto-results.js";
import { le, Writer } from "../../support/protowire.js";
import { UnexpectedResponseError } from "../../../src/errors.js";

// Messages written by the test's own writer, field numbers from the SDK's tinker_public.proto.
const DTYPE = { float32: 1, int64: 2, int32: 3, bfloat16: 4 } as const;

function batched(values: number[][], dtype: keyof typeof DTYPE, trailing: number[] = []): Writer {
  const kind = ({ float32: "f32", int64: "i64", int32: "i32", bfloat16: "bf16" } as const)[dtype];
  const size = { f32: 4, i64: 8, i32: 4, bf16: 2 }[kind];
  const offsets = [0];
  for (const v of values) offsets.push(offsets.at(-1)! + v.length * size);
  const w = new Writer().bytes(1, le(values.flat(), kind)).bytes(2, le(offsets, "i64")).varint(3, DTYPE[dtype]);
  return trailing.length ? w.packed(4, trailing) : w;
}

function record(fields: Record<string, Writer>, numDatums: number): Writer {
  const w = new Writer().bytes(1, "ArrayRecord");
  for (const [name, tensor] of Object.entries(fields)) w.bytes(2, new Writer().bytes(1, name).bytes(2, tensor));
  return w.varint(3, numDatums);
}

describe("protobuf results", () => {
  it("cut each ArrayRecord field at its int64 byte offsets, in float32, bfloat16, int32 and int64, across records", () => {
    const body = new Writer()
      .bytes(1, "tinker.ArrayRecord")
      .bytes(
        2,
        record(
          {
            logprobs: batched([[-0.5, -1.25], [-2]], "float32"),
            elementwise_loss: batched([[0.5, 1.25], [2]], "bfloat16"),
            token_ids: batched([[7, -3], [2 ** 31 - 1]], "int32"),
          },
          2,
        ),
      )
      .bytes(
        2,
        record(
          {
            logprobs: batched([[-3, -4, -0.125]], "float32"),
            elementwise_loss: batched([[3, 4, 0.125]], "bfloat16"),
            token_ids: batched([[2 ** 40, 0, 1]], "int64"),
          },
          1,
        ),
      )
      .bytes(3, new Writer().bytes(1, "loss:sum").double(2, 10.875))
      .finish();
    expect(readForwardBackwardProto(body)).toEqual({
      lossFnOutputs: [
        { logprobs: [-0.5, -1.25], elementwise_loss: [0.5, 1.25], token_ids: [7, -3] },
        { logprobs: [-2], elementwise_loss: [2], token_ids: [2 ** 31 - 1] },
        { logprobs: [-3, -4, -0.125], elementwise_loss: [3, 4, 0.125], token_ids: [2 ** 40, 0, 1] },
      ],
      metrics: { "loss:sum": 10.875 },
    });
  });

  it("read bfloat16 as the upper half of a float32, exactly", () => {
    // 1 + 2^-7 and -2^100 are bfloat16 values: their upper halves read back exactly.
    const out = readForwardBackwardProto(
      new Writer().bytes(2, record({ logprobs: batched([[1 + 2 ** -7, -(2 ** 100)]], "bfloat16") }, 1)).finish(),
    );
    expect(out.lossFnOutputs[0]!.logprobs).toEqual([1 + 2 ** -7, -(2 ** 100)]);
  });

  it("count datums from the fields when num_datums is missing, and refuse what does not add up", () => {
    const noCount = new Writer().bytes(2, record({ logprobs: batched([[-1], [-2]], "float32") }, 0)).finish();
    expect(readForwardBackwardProto(noCount).lossFnOutputs).toEqual([{ logprobs: [-1] }, { logprobs: [-2] }]);
    const badOffsets = new Writer()
      .bytes(
        2,
        new Writer().bytes(
          2,
          new Writer().bytes(1, "logprobs").bytes(
            2,
            new Writer()
              .bytes(1, le([-1, -2], "f32"))
              .bytes(2, le([0, 6], "i64"))
              .varint(3, 1),
          ),
        ),
      )
      .finish();
    expect(() => readForwardBackwardProto(badOffsets)).toThrow(/datum 0 spans bytes 0\.\.6, not whole values/);
    const noLogprobs = new Writer().bytes(2, record({ other: batched([[1]], "float32") }, 1)).finish();
    expect(() => readForwardBackwardProto(noLogprobs)).toThrow(/datum 0 has no logprobs/);
    expect(() => readForwardBackwardProto(Uint8Array.from([0xff, 0xff]))).toThrow(UnexpectedResponseError);
    const unspecified = new Writer()
      .bytes(
        2,
        new Writer().bytes(2, new Writer().bytes(1, "logprobs").bytes(2, new Writer().bytes(1, le([1], "f32")))),
      )
      .finish();
    expect(() => readForwardBackwardProto(unspecified)).toThrow(/unsupported dtype 0/);
  });

  it("read a SampleResponse: int32 tokens, float32 logprobs, NaN prompt logprobs as null", () => {
    const body = new Writer()
      .bytes(
        1,
        new Writer()
          .varint(1, 0)
          .bytes(2, le([5, 6], "i32"))
          .bytes(3, le([-0.5, -0.25], "f32")),
      )
      .bytes(1, new Writer().varint(1, 1).bytes(2, le([9], "i32")))
      .bytes(2, le([Number.NaN, -1.5, -0.75], "f32"))
      .varint(4, 3)
      .finish();
    expect(readSampleProto(body)).toEqual({
      sequences: [
        { tokens: [5, 6], logprobs: [-0.5, -0.25], stopReason: "stop" },
        { tokens: [9], logprobs: [], stopReason: "length" },
      ],
      promptLogprobs: [null, -1.5, -0.75],
    });
    expect(() => readSampleProto(new Writer().bytes(1, new Writer().varint(1, 7)).finish())).toThrow(
      /unknown stop_reason 7/,
    );
  });

  it("take protobuf bytes or parsed JSON, whichever the server answered", () => {
    const json = { sequences: [{ stop_reason: "stop", tokens: [1], logprobs: [-1] }] };
    expect(sampleResult(json)).toEqual({ sequences: [{ tokens: [1], logprobs: [-1], stopReason: "stop" }] });
    expect(
      forwardBackwardResult({ loss_fn_outputs: [{ logprobs: { data: [-1], dtype: "float32" } }], metrics: {} }),
    ).toEqual({ lossFnOutputs: [{ logprobs: [-1] }], metrics: {} });
  });
});
