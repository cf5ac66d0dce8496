/**
 * One entry to every tokenizer nexrl knows: the local engine's byte tokenizer for its presets,
 * Hugging Face tokenizers from a folder or the Hub otherwise.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { ByteTokenizer, MODEL_PRESETS } from "../../engine/index.js";
import type { Tokenizer } from "../../wire/tokenizer.js";
import { HfTokenizer, type HfTokenizerOptions } from "./hf-tokenizer.js";
import { downloadTokenizer, hubTokenizerCache, type HubDownloadOptions, type HubTokenizerCache } from "./hub.js";
import { ConfigError } from "../../errors.js";

/** Options of {@link loadTokenizer}: where and how Hub tokenizers are downloaded, and the chat renderer. */
export interface LoadTokenizerOptions extends HubDownloadOptions, HfTokenizerOptions {}

/** Names that select the local engine's {@link ByteTokenizer}: its presets and `byte` (its tokenizer id). */
function isByteTokenizerName(name: string): boolean {
  return name === "byte" || Object.hasOwn(MODEL_PRESETS, name);
}

/** Where the tokenizer of a name comes from; see {@link locateTokenizer}. */
export type TokenizerSource =
  | { readonly kind: "byte" }
  | { readonly kind: "folder"; readonly folder: string }
  | { readonly kind: "hub"; readonly id: string; readonly cache: HubTokenizerCache };

/**
 * Where the tokenizer of `nameOrPath` comes from (see {@link loadTokenizer}), without loading or
 * downloading it: a Hub id says where it is cached and whether it is already.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for a file, a missing folder path or an invalid Hub id.
 */
export async function locateTokenizer(
  nameOrPath: string,
  options: LoadTokenizerOptions = {},
): Promise<TokenizerSource> {
  if (isByteTokenizerName(nameOrPath)) return { kind: "byte" };
  const info = await stat(nameOrPath).catch(() => undefined);
  if (info?.isDirectory()) return { kind: "folder", folder: nameOrPath };
  if (info)
    throw new ConfigError(
      `${nameOrPath} is a file; pass the folder that holds tokenizer.json and tokenizer_config.json`,
    );
  if (/^(\.{1,2}|~)?[\\/]/.test(nameOrPath)) throw new ConfigError(`there is no tokenizer folder at ${nameOrPath}`);
  return { kind: "hub", id: nameOrPath, cache: await hubTokenizerCache(nameOrPath, options) };
}

/**
 * The tokenizer of `nameOrPath`:
 * - a local engine preset (`tiny`, `small`, `medium`) or `byte`: the engine's {@link ByteTokenizer};
 * - an existing folder: the Hugging Face tokenizer in it;
 * - otherwise a Hub model id such as `Qwen/Qwen3-0.6B`: its tokenizer, downloaded once into
 *   `options.cacheDir` and read from there afterwards.
 *
 * A Hugging Face tokenizer renders chats with its chat template, or with `options.renderer`
 * (see {@link HfTokenizerOptions}).
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} when the folder lacks the files or the download fails.
 */
export async function loadTokenizer(nameOrPath: string, options: LoadTokenizerOptions = {}): Promise<Tokenizer> {
  const source = await locateTokenizer(nameOrPath, options);
  const hf = { ...(options.renderer !== undefined && { renderer: options.renderer }) };
  switch (source.kind) {
    case "byte":
      if (options.renderer !== undefined) {
        throw new ConfigError(
          `the renderer "${options.renderer}" needs a Hugging Face tokenizer; ${nameOrPath} is the local engine's byte tokenizer, which has its own chat format`,
        );
      }
      return new ByteTokenizer();
    case "folder":
      return HfTokenizer.fromFolder(source.folder, hf);
    case "hub":
      return HfTokenizer.fromFolder(
        source.cache.cached ? source.cache.folder : await downloadTokenizer(source.id, options),
        hf,
      );
  }
}
