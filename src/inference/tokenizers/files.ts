/**
 * Reads the files of a Hugging Face tokenizer from a folder.
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ConfigError } from "../../errors.js";

/** The parsed files a Hugging Face tokenizer is built from. */
export interface HfTokenizerFiles {
  /** Contents of `tokenizer.json`. */
  tokenizerJson: Record<string, unknown>;
  /** Contents of `tokenizer_config.json`. */
  tokenizerConfig: Record<string, unknown>;
  /** Contents of `chat_template.jinja`, which newer models ship instead of `chat_template` in the config. */
  chatTemplate?: string;
}

/** Files a tokenizer folder must hold. */
export const REQUIRED_TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"] as const;

/** Optional file holding the chat template outside the config. */
export const CHAT_TEMPLATE_FILE = "chat_template.jinja";

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigError(`cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
}

async function readJson(dir: string, name: string): Promise<Record<string, unknown>> {
  const path = join(dir, name);
  const text = await readOptional(path);
  if (text === undefined) {
    throw new ConfigError(
      `${dir} has no ${name}; a Hugging Face tokenizer folder needs ${REQUIRED_TOKENIZER_FILES.join(" and ")} (download them from the model's page on the Hub)`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${path} is not valid JSON (${(error as Error).message}); download it again`, {
      cause: error,
    });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConfigError(`${path} must hold a JSON object; download it again`);
  }
  return value as Record<string, unknown>;
}

/**
 * Reads `tokenizer.json`, `tokenizer_config.json` and, when present, `chat_template.jinja` from
 * `dir`.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} when a required file is missing or malformed.
 */
export async function readTokenizerFolder(dir: string): Promise<HfTokenizerFiles> {
  const [tokenizerJson, tokenizerConfig, chatTemplate] = await Promise.all([
    readJson(dir, "tokenizer.json"),
    readJson(dir, "tokenizer_config.json"),
    readOptional(join(dir, CHAT_TEMPLATE_FILE)),
  ]);
  return { tokenizerJson, tokenizerConfig, ...(chatTemplate !== undefined && { chatTemplate }) };
}
