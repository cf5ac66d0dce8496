/**
 * Where the engine keeps its files and how it writes them: checkpoint names are validated,
 * files are written to a temporary name and then moved into place, so a reader never sees a
 * half-written file, and sampler snapshots are never overwritten.
 *
 * @module
 * @internal
 */
import { randomBytes } from "node:crypto";
import { link, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { decodeStateFile, type StateFileContents } from "./state-file.js";
import { EngineError, InputError, storageError } from "../errors.js";
import { stateFileError } from "./state-file.js";

const NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/;

/** Absolute path of the file named `name` in `outputDir/<folder>` with extension `ext`. */
export function filePath(
  outputDir: string,
  folder: "checkpoints" | "sampler_weights",
  name: string,
  ext: ".nxs" | ".nxw",
): string {
  if (!NAME.test(name)) {
    throw new InputError(
      `checkpoint name ${JSON.stringify(name)} is not allowed; use 1–200 letters, digits, "_", "-" or ".", not starting with "." or "-" (for example "step_000010")`,
    );
  }
  return resolve(outputDir, folder, name + ext);
}

/**
 * Writes `bytes` to `path` through a temporary file in the same folder, removed when the write
 * fails. With `exclusive`, an existing file is never replaced.
 * @throws {@link "nexrl".EngineError | EngineError} when `exclusive` and `path` exists, and
 * {@link "nexrl/errors".StorageError | StorageError} when the disk is full or not writable.
 */
export async function writeFileAtomic(path: string, bytes: Uint8Array, exclusive: boolean): Promise<void> {
  const tmp = join(dirname(path), `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    await makeFolder(dirname(path));
    await writeFile(tmp, bytes);
    if (exclusive) {
      await link(tmp, path).catch((err: NodeJS.ErrnoException) => {
        if (err.code === "EEXIST") {
          throw new EngineError(
            `${path} already exists and sampler snapshots are immutable; save under a new name (for example with the step number)`,
            { code: "snapshot_exists" },
          );
        }
        throw err;
      });
    } else {
      await rename(tmp, path);
    }
  } catch (error) {
    throw storageError(path, error);
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * Creates `dir` and its missing parents. Node's recursive `mkdir` says ENOENT when a parent
 * cannot be created (on a read-only file system, say), so that case is retried one folder at a
 * time to throw the real reason.
 */
export async function makeFolder(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT" || dirname(dir) === dir) throw error;
    await makeFolder(dirname(dir));
    await mkdir(dir).catch((inner: NodeJS.ErrnoException) => {
      if (inner.code !== "EEXIST") throw inner;
    });
  }
}

const TEMPORARY = /^\.[0-9a-f]{12}\.tmp$/;

/**
 * Whether `name` is one of the temporary files {@link writeFileAtomic} writes, which a process
 * killed mid-write leaves behind.
 */
export const isTemporaryName = (name: string): boolean => TEMPORARY.test(name);

/**
 * Reads and verifies a state or snapshot file.
 * @throws {@link "nexrl".EngineError | EngineError} when it is missing, foreign, truncated or corrupt.
 */
export async function readStateFile(path: string): Promise<StateFileContents> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT")
      throw stateFileError(
        path,
        "not_found",
        "no such file; check the path returned by saveState or saveWeightsForSampler",
      );
    throw err;
  }
  return decodeStateFile(bytes, path);
}
