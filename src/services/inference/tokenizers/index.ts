/**
 * Tokenizers of remote models: Hugging Face `tokenizer.json` + chat template, loaded from a
 * folder or the Hub, and {@link loadTokenizer}, which also knows the local engine's presets.
 *
 * @module
 */
export { readTokenizerFolder, type HfTokenizerFiles } from "./files.js";
export { HfTokenizer } from "./hf-tokenizer.js";
export { defaultTokenizerCacheDir, downloadTokenizer, type HubDownloadOptions } from "./hub.js";
export { loadTokenizer, type LoadTokenizerOptions } from "./load.js";
