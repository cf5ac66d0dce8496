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
 * @throws {@link "nexrl/errors".StorageError | StorageError} naming the file when the disk is full or not writable.
 */
export async function writeFiles(
  dir: string,
  files: ReadonlyArray<readonly [string, string | Uint8Array]>,
): Promise<string[]> {
  const paths: string[] = [];
  let path = dir;
  try {
    await makeFolder(dir);
    for (const [name, content] of files) {
      path = join(dir, name);
      await writeFile(path, content);
      paths.push(path);
    }
  } catch (error) {
    throw storageError(path, error);
  }
  return paths;
}
