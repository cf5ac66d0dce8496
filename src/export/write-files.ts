/**
 * Writing an export's files.
 * @module
 * @internal
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeFolder } from "../engine/storage.js";
import { storageError } from "../errors.js";

/**
 * Writes each `[name, content]` of `files` into `dir` (created when missing) and returns their paths.
 * @throws {@link "nexrl".StorageError | StorageError} naming the file when the disk is full or not writable.
 */
export async function writeFiles(
  dir: string,
  files: ReadonlyArray<readonly [string, string | Uint8Array]>,
): Promise<string[]> {
  await makeFolder(dir).catch((error: unknown) => {
    throw storageError(dir, error);
  });
  const paths: string[] = [];
  for (const [name, content] of files) {
    const path = join(dir, name);
    await writeFile(path, content).catch((error: unknown) => {
      throw storageError(path, error);
    });
    paths.push(path);
  }
  return paths;
}
