/**
 * Tar archives (POSIX ustar), gzipped as Tinker's checkpoint archives are: written for
 * `nexrl serve`'s checkpoint downloads, read when exporting a downloaded checkpoint.
 * Only regular files with names of at most 100 bytes are written; reading skips every entry
 * that is not a regular file and refuses names that climb out of the archive.
 * @module
 * @internal
 */
import { gunzipSync, gzipSync } from "node:zlib";
import { InputError } from "../errors.js";

/** One regular file of an archive. */
export interface TarEntry {
  /** Its path inside the archive (`/`-separated, relative). */
  name: string;
  /** Its bytes. */
  data: Uint8Array;
}

const BLOCK = 512;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, size: number, mtimeSeconds: number): Uint8Array {
  const block = new Uint8Array(BLOCK);
  const nameBytes = new TextEncoder().encode(name);
  if (nameBytes.length > 100) throw new InputError(`tar entry name "${name}" is longer than 100 bytes`);
  const put = (text: string, at: number): void => block.set(new TextEncoder().encode(text), at);
  block.set(nameBytes, 0);
  put(octal(0o644, 8), 100);
  put(octal(0, 8), 108);
  put(octal(0, 8), 116);
  put(octal(size, 12), 124);
  put(octal(mtimeSeconds, 12), 136);
  put("        ", 148); // The checksum is computed with its own field as spaces.
  put("0", 156);
  put("ustar\u000000", 257);
  let sum = 0;
  for (const byte of block) sum += byte;
  put(octal(sum, 7) + " ", 148);
  return block;
}

/** The gzipped tar of `entries`, each dated `mtimeSeconds`. */
export function writeTarGz(entries: readonly TarEntry[], mtimeSeconds: number): Buffer {
  const parts: Uint8Array[] = [];
  for (const entry of entries) {
    parts.push(header(entry.name, entry.data.length, Math.floor(mtimeSeconds)), entry.data);
    const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(new Uint8Array(pad));
  }
  parts.push(new Uint8Array(2 * BLOCK));
  return gzipSync(Buffer.concat(parts));
}

function field(block: Uint8Array, at: number, length: number): string {
  const bytes = block.subarray(at, at + length);
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end === -1 ? bytes : bytes.subarray(0, end));
}

/**
 * The regular files of a tar archive, gzipped or not (`what` names it in errors). Directory,
 * link and other entries are skipped; GNU long names and pax headers are not read.
 * @throws {@link "nexrl/errors".InputError | InputError} for a truncated archive or a name that is absolute or contains `..`.
 */
export function readTar(bytes: Uint8Array, what: string): TarEntry[] {
  let tar = bytes;
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      tar = new Uint8Array(gunzipSync(bytes));
    } catch (error) {
      throw new InputError(`${what} is not a complete gzip file (${(error as Error).message}); download it again`);
    }
  }
  const entries: TarEntry[] = [];
  for (let at = 0; at + BLOCK <= tar.length;) {
    const block = tar.subarray(at, at + BLOCK);
    if (block.every((b) => b === 0)) break;
    const prefix = field(block, 345, 155);
    const name = (prefix ? `${prefix}/` : "") + field(block, 0, 100);
    const size = parseInt(field(block, 124, 12).trim() || "0", 8);
    const type = String.fromCharCode(block[156] ?? 0);
    const start = at + BLOCK;
    if (!Number.isFinite(size) || start + size > tar.length)
      throw new InputError(`${what} is not a complete tar archive (entry "${name}" is cut off)`);
    if (type === "0" || type === "\0") {
      const clean = name.replace(/^\.\//, "");
      if (clean.startsWith("/") || clean.split("/").includes(".."))
        throw new InputError(`${what} holds an entry "${name}" outside the archive; refusing to read it`);
      entries.push({ name: clean, data: tar.slice(start, start + size) });
    }
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  return entries;
}
