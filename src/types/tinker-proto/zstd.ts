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
 * The content of the zstd frames in `bytes`. A frame that does not state its content size (a
 * streaming compressor's) may expand to at most `maxBytes`.
 */
export async function zstdDecompress(bytes: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  return (await zstd()).decompress(bytes, { defaultHeapSize: maxBytes });
}
