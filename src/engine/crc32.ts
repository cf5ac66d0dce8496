/**
 * CRC-32 checksums: IEEE 802.3's (the checksum of zip and PNG) for state-file integrity checks,
 * and Castagnoli's CRC-32C, which TensorBoard's event files (TFRecord) carry.
 *
 * @module
 * @internal
 */

/** The byte table of the reflected CRC-32 with polynomial `poly`. */
function table(poly: number): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? poly ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}

const IEEE = table(0xedb88320);
const CASTAGNOLI = table(0x82f63b78);

function update(t: Uint32Array, bytes: Uint8Array, crc: number): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < bytes.length; i++) c = t[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-32 of `bytes`, continuing from `crc` (the CRC of the bytes before, 0 to start). */
export function crc32(bytes: Uint8Array, crc = 0): number {
  return update(IEEE, bytes, crc);
}

/** CRC-32C (Castagnoli) of `bytes`. */
export function crc32c(bytes: Uint8Array): number {
  return update(CASTAGNOLI, bytes, 0);
}
