/**
 * zstd for protobuf `forward_backward` bodies (`proto_compress_fwdbwd`; `Content-Encoding: zstd`),
 * written by the Tinker client and read by `nexrl serve`.
 * Node 20 has no zstd of its own, so it comes from `@bokuweb/zstd-wasm`, the zstd library built
 * to WebAssembly; the module is loaded and initialised on first use only.
 *
 * @module
 */

import type * as Zstd from "@bokuweb/zstd-wasm";

/** The WebAssembly zstd, initialised once. */
let codec: Promise<typeof Zstd> | undefined;

function zstd(): Promise<typeof Zstd> {
  codec ??= import("@bokuweb/zstd-wasm").then(async (module) => {
    await module.init();
    return module;
  });
  return codec;
}

/** `bytes` as one zstd frame (level 3, zstd's default). */
export async function zstdCompress(bytes: Uint8Array): Promise<Uint8Array> {
  return (await zstd()).compress(bytes, 3);
}

/**
 * The content of the zstd frames in `bytes`, at most `maxBytes`. A frame that does not state its
 * content size (a streaming compressor's) is tried into 32 times its size, doubling up to
 * `maxBytes`: WebAssembly memory, once grown, is never given back.
 */
export async function zstdDecompress(bytes: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  const codec = await zstd();
  for (let room = Math.min(maxBytes, Math.max(1 << 20, bytes.byteLength * 32)); ; room = Math.min(maxBytes, room * 2)) {
    try {
      return codec.decompress(bytes, { defaultHeapSize: room });
    } catch (error) {
      // zstd's error 70 (ZSTD_error_dstSize_tooSmall) is the only one more room can help.
      if (room >= maxBytes || !/code -70$/.test((error as Error).message)) throw error;
    }
  }
}
