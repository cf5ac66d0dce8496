/**
 * Tokenizers of remote models: Hugging Face `tokenizer.json` + chat template, loaded from a
 * folder or the Hub, and {@link loadTokenizer}, which also knows the local engine's presets.
 *
 * @module
 */
export { readTokenizerFolder, type HfTokenizerFiles } from "./files.js";
export { HfTokenizer, type HfTokenizerOptions } from "./hf-tokenizer.js";
export { RENDERER_IDS, type RendererId } from "../renderers/index.js";
export { defaultTokenizerCacheDir, downloadTokenizer, type HubDownloadOptions } from "./hub.js";
export { loadTokenizer, type LoadTokenizerOptions } from "./load.js";
