/**
 * One entry to every tokenizer nexrl knows: the local engine's byte tokenizer for its presets,
 * Hugging Face tokenizers from a folder or the Hub otherwise.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { ByteTokenizer, MODEL_PRESETS } from "../../../engine/index.js";
import type { Tokenizer } from "../../../types/tokenizer.js";
import { HfTokenizer } from "./hf-tokenizer.js";
import { downloadTokenizer, type HubDownloadOptions } from "./hub.js";
import { ConfigError } from "../../../errors.js";

/** Options of {@link loadTokenizer}: where and how Hub tokenizers are downloaded. */
export type LoadTokenizerOptions = HubDownloadOptions;

/** Names that select the local engine's {@link ByteTokenizer}: its presets and `byte` (its tokenizer id). */
function isByteTokenizerName(name: string): boolean {
  return name === "byte" || Object.hasOwn(MODEL_PRESETS, name);
}

/**
 * The tokenizer of `nameOrPath`:
 * - a local engine preset (`tiny`, `small`, `medium`) or `byte`: the engine's {@link ByteTokenizer};
 * - an existing folder: the Hugging Face tokenizer in it;
 * - otherwise a Hub model id such as `Qwen/Qwen3-0.6B`: its tokenizer, downloaded once into
 *   `options.cacheDir` and read from there afterwards.
 * @throws {@link ConfigError} when the folder lacks the files or the download fails.
 */
export async function loadTokenizer(nameOrPath: string, options: LoadTokenizerOptions = {}): Promise<Tokenizer> {
  if (isByteTokenizerName(nameOrPath)) return new ByteTokenizer();
  const info = await stat(nameOrPath).catch(() => undefined);
  if (info?.isDirectory()) return HfTokenizer.fromFolder(nameOrPath);
  if (info)
    throw new ConfigError(
      `${nameOrPath} is a file; pass the folder that holds tokenizer.json and tokenizer_config.json`,
    );
  if (/^(\.{1,2}|~)?[\\/]/.test(nameOrPath)) throw new ConfigError(`there is no tokenizer folder at ${nameOrPath}`);
  const folder = await downloadTokenizer(nameOrPath, options);
  return HfTokenizer.fromFolder(folder);
}
