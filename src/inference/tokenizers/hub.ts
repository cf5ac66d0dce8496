/**
 * Downloads the files of a Hugging Face tokenizer from the Hub into a cache folder.
 *
 * @module
 */
import { mkdir, rename, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { networkReason } from "../network-reason.js";
import { CHAT_TEMPLATE_FILE, REQUIRED_TOKENIZER_FILES } from "./files.js";
import { ConfigError } from "../../errors.js";

/** Options of {@link downloadTokenizer}. */
export interface HubDownloadOptions {
  /** Folder of downloaded tokenizers (default: `$XDG_CACHE_HOME/nexrl/tokenizers`, else `~/.cache/nexrl/tokenizers`). */
  cacheDir?: string;
  /** Branch, tag or commit (default `main`). */
  revision?: string;
  /** Hub address (default: `$HF_ENDPOINT`, else `https://huggingface.co`). */
  endpoint?: string;
  /** Access token for gated or private models (default: `$HF_TOKEN`). Never printed. */
  token?: string;
  /** Milliseconds before a download is abandoned (default 60 000). */
  timeoutMs?: number;
}

const HUB_ID = /^[A-Za-z0-9][\w.-]*(\/[A-Za-z0-9][\w.-]*)?$/;
const REVISION = /^[\w.-]+$/;

/** The default cache folder of downloaded tokenizers. */
export function defaultTokenizerCacheDir(): string {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "nexrl", "tokenizers");
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

/** Where a Hub tokenizer is (or would be) cached, and whether it already is; see {@link hubTokenizerCache}. */
export interface HubTokenizerCache {
  /** The cache folder of the id and revision. */
  folder: string;
  /** True when the folder holds the required files: loading it makes no request. */
  cached: boolean;
  /** The Hub address the files would come from. */
  endpoint: string;
  /** The branch, tag or commit. */
  revision: string;
}

/**
 * Where {@link downloadTokenizer} keeps the tokenizer of Hub model `id`, and whether it is there
 * already; makes no request.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an invalid id or revision.
 */
export async function hubTokenizerCache(id: string, options: HubDownloadOptions = {}): Promise<HubTokenizerCache> {
  const revision = options.revision ?? "main";
  if (!HUB_ID.test(id) || id.includes("..")) {
    throw new ConfigError(`"${id}" is neither a tokenizer folder nor a Hugging Face model id like "Qwen/Qwen3-0.6B"`);
  }
  if (!REVISION.test(revision))
    throw new ConfigError(
      `revision "${revision}" must be a branch, tag or commit name (letters, digits, "_", "-", ".")`,
    );
  // join() splits the id at "/" into the owner and repository folders (and normalises it on Windows).
  const folder = join(options.cacheDir ?? defaultTokenizerCacheDir(), id, revision);
  const present = await Promise.all(REQUIRED_TOKENIZER_FILES.map((name) => isFile(join(folder, name))));
  const endpoint = (options.endpoint ?? process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
  return { folder, cached: present.every(Boolean), endpoint, revision };
}

/**
 * Downloads `tokenizer.json`, `tokenizer_config.json` and, when the model has one,
 * `chat_template.jinja` of Hub model `id` into `<cacheDir>/<id>/<revision>/`, and returns that
 * folder. A folder that already holds the required files is used as it is, without a request.
 * @throws {@link "nexrl/errors".ConfigError | ConfigError} for an invalid id, an unreachable Hub (offline), a model
 *   that does not exist or needs a token, and files that cannot be written.
 */
export async function downloadTokenizer(id: string, options: HubDownloadOptions = {}): Promise<string> {
  const { folder, cached, endpoint, revision } = await hubTokenizerCache(id, options);
  if (cached) return folder;

  const token = options.token ?? process.env.HF_TOKEN;
  const fetchFile = async (name: string, required: boolean): Promise<string | undefined> => {
    const url = `${endpoint}/${id}/resolve/${revision}/${name}`;
    let response: Response;
    try {
      response = await fetch(url, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
      });
    } catch (error) {
      throw new ConfigError(
        `cannot download ${url} (${networkReason(error)}); this machine may be offline: copy ${REQUIRED_TOKENIZER_FILES.join(" and ")} of ${id} into ${folder} or into a folder whose path you pass instead of the id`,
        { cause: error },
      );
    }
    if (response.ok) return response.text();
    await response.body?.cancel();
    if (response.status === 404 && !required) return undefined;
    const hint =
      response.status === 401 || response.status === 403
        ? "the model is gated or private: accept its licence on the Hub and set HF_TOKEN (or the token option)"
        : response.status === 404
          ? `check the model id and revision "${revision}"`
          : "try again later";
    throw new ConfigError(`downloading ${url} failed with HTTP ${response.status}; ${hint}`);
  };
  const [tokenizerJson, tokenizerConfig, chatTemplate] = await Promise.all([
    fetchFile("tokenizer.json", true),
    fetchFile("tokenizer_config.json", true),
    fetchFile(CHAT_TEMPLATE_FILE, false),
  ]);
  try {
    await mkdir(folder, { recursive: true });
    const files: Array<[string, string | undefined]> = [
      [CHAT_TEMPLATE_FILE, chatTemplate],
      ["tokenizer_config.json", tokenizerConfig],
      ["tokenizer.json", tokenizerJson],
    ];
    for (const [name, text] of files) {
      if (text === undefined) continue;
      // Write then rename, so that a crash never leaves a half-written file the cache would trust.
      const partial = join(folder, `${name}.${process.pid}.partial`);
      await writeFile(partial, text);
      await rename(partial, join(folder, name));
    }
  } catch (error) {
    throw new ConfigError(
      `cannot write the downloaded tokenizer into ${folder}: ${(error as Error).message}; set cacheDir to a writable folder`,
      { cause: error },
    );
  }
  return folder;
}
